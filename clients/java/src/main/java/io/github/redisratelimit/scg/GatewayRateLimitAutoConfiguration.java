package io.github.redisratelimit.scg;

import java.util.List;

import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.context.annotation.Bean;
import org.springframework.data.redis.connection.ReactiveRedisConnectionFactory;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.ReactiveRedisTemplate;
import org.springframework.data.redis.core.ReactiveStringRedisTemplate;
import org.springframework.data.redis.core.script.RedisScript;

import io.github.redisratelimit.RateLimitClient;

/**
 * Registers {@link ModuleRedisRateLimiter} as the gateway's {@code redisRateLimiter} bean, before
 * Spring Cloud Gateway's own ({@code @ConditionalOnMissingBean} there and here: an application's
 * own {@code RedisRateLimiter} bean still wins). Adding this jar is the whole switch; the module
 * client shares the application's Lettuce client (its connection settings, cluster topology).
 */
@AutoConfiguration(afterName = "org.springframework.boot.data.redis.autoconfigure.DataRedisReactiveAutoConfiguration",
        beforeName = "org.springframework.cloud.gateway.config.GatewayRedisAutoConfiguration")
@ConditionalOnClass(RedisRateLimiter.class)
@ConditionalOnBean(ReactiveRedisTemplate.class)
@EnableConfigurationProperties(GatewayRateLimitProperties.class)
public class GatewayRateLimitAutoConfiguration {

    /** The auto-configuration (created by Spring). */
    public GatewayRateLimitAutoConfiguration() {
    }

    /**
     * @param redisTemplate        the gateway's template
     * @param script               the stock script bean (never run)
     * @param configurationService binds route arguments
     * @param properties           {@code redis-ratelimit.gateway.*}
     * @return the limiter
     */
    @Bean
    @ConditionalOnMissingBean
    public RedisRateLimiter redisRateLimiter(ReactiveStringRedisTemplate redisTemplate,
            @Qualifier(RedisRateLimiter.REDIS_SCRIPT_NAME) RedisScript<List<Long>> script,
            ConfigurationService configurationService, GatewayRateLimitProperties properties) {
        ReactiveRedisConnectionFactory factory = redisTemplate.getConnectionFactory();
        return new ModuleRedisRateLimiter(redisTemplate, script, configurationService,
                () -> client(factory, properties), properties);
    }

    static RateLimitClient client(ReactiveRedisConnectionFactory factory, GatewayRateLimitProperties properties) {
        if (!(factory instanceof LettuceConnectionFactory lettuce)) {
            throw new IllegalStateException("redis-ratelimit needs Lettuce (Spring Boot's default), not "
                    + factory.getClass().getName());
        }
        return RateLimitClient.of(lettuce.getRequiredNativeClient(), properties.getTimeout());
    }
}
