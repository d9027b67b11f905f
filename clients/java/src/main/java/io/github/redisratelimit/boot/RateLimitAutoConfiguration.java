package io.github.redisratelimit.boot;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import io.github.redisratelimit.RateLimitClient;
import io.github.redisratelimit.web.RateLimitServletFilter;
import io.github.redisratelimit.web.RateLimitWebFilter;

/**
 * The Spring Boot starter: a {@link RateLimitClient} bean over the application's Lettuce client
 * (its connection settings and cluster topology), and with {@code redis-ratelimit.web.enabled}
 * the web filter of the application's kind (WebFlux or servlet).
 */
@AutoConfiguration(afterName = "org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration")
@ConditionalOnClass(LettuceConnectionFactory.class)
@ConditionalOnBean(LettuceConnectionFactory.class)
@EnableConfigurationProperties(RateLimitProperties.class)
public class RateLimitAutoConfiguration {

    /** The auto-configuration (created by Spring). */
    public RateLimitAutoConfiguration() {
    }

    /**
     * @param factory    the application's connection factory
     * @param properties {@code redis-ratelimit.*}
     * @return the client (closed with the context)
     */
    @Bean
    @ConditionalOnMissingBean
    public RateLimitClient rateLimitClient(LettuceConnectionFactory factory, RateLimitProperties properties) {
        if (!factory.isRunning()) {
            factory.start();
        }
        return RateLimitClient.of(factory.getRequiredNativeClient(), properties.getTimeout());
    }

    /** The WebFlux filter. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
    @ConditionalOnProperty(prefix = "redis-ratelimit.web", name = "enabled", havingValue = "true")
    static class Reactive {

        @Bean
        @ConditionalOnMissingBean
        RateLimitWebFilter rateLimitWebFilter(RateLimitClient client, RateLimitProperties properties) {
            RateLimitProperties.Web w = properties.getWeb();
            return RateLimitWebFilter.builder(client, w.toLimit()).prefix(w.getPrefix()).failOpen(w.isFailOpen())
                    .build();
        }
    }

    /** The servlet filter. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
    @ConditionalOnClass(name = "jakarta.servlet.Filter")
    @ConditionalOnProperty(prefix = "redis-ratelimit.web", name = "enabled", havingValue = "true")
    static class Servlet {

        @Bean
        @ConditionalOnMissingBean
        RateLimitServletFilter rateLimitServletFilter(RateLimitClient client, RateLimitProperties properties) {
            RateLimitProperties.Web w = properties.getWeb();
            return new RateLimitServletFilter(client, w.toLimit(), RateLimitServletFilter::clientAddress,
                    w.getPrefix(), "default", w.isFailOpen());
        }
    }
}
