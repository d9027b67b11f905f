# clients/java: the Java package (io.github.redis-ratelimit:redis-ratelimit: the Lettuce client,
# the Spring Cloud Gateway and Redisson drop-ins). Included by the top Makefile.
#   make java-test      javac -Xlint:all -Werror, Javadoc and the package's JUnit 5 suite (each test
#                       class starts its own server with the module on a free port)
#   make java-compat    the package's suite on each compat server and Spring Cloud Gateway 5.0.3's
#                       own RedisRateLimiter tests (the kit's main suite) and Redisson 4.7.0's
#                       RedissonRateLimiterTest (in the background) through the drop-ins (compat/run.sh)
#   make java-peer-env  the export lines that point the kit (../shared/peers) at the drop-ins
#   make java-jar       clients/java/target/redis-ratelimit-<version>.jar
#   make java-dist      that jar into dist/ (make dist lists it in SHA256SUMS)
#   make bench-java     the drop-ins against stock SCG and Redisson on one server: bench/CLIENTS.md "## Java"
JAVA_PKG := clients/java
MVN      ?= mvn
MVN_Q    := $(MVN) -B -ntp -q -f $(JAVA_PKG)/pom.xml
JAVA_JAR  = $(JAVA_PKG)/target/redis-ratelimit-$(VERSION).jar

CLIENT_TESTS  += java-test
CLIENT_DEPS   += java-deps
CLIENT_COMPAT += java-compat
CLIENT_BENCH  += bench-java

.PHONY: java-system java-deps java-test java-jar java-dist java-compat java-peer-env bench-java

## java-system: a JDK 17+ and Maven (Debian's, when missing)
java-system: deps
	@command -v javac >/dev/null 2>&1 && command -v $(MVN) >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless maven; }

## java-deps: the pinned dependencies and plugins into ~/.m2 (Maven Central), once
java-deps: java-system
	$(MVN_Q) dependency:resolve dependency:resolve-plugins >/dev/null

java-test: build java-deps
	$(MVN_Q) verify javadoc:javadoc -Drl.module=$(CURDIR)/$(MODULE)

java-jar: java-deps
	$(MVN_Q) package -DskipTests

java-dist: java-jar
	@mkdir -p dist && cp $(JAVA_JAR) dist/ && echo "$(CURDIR)/dist/$(notdir $(JAVA_JAR))"

## java-compat: the package's suite on each compat server under target/servers (make compat builds
## them; Debian's redis-server otherwise) and the host suites on RL_SERVER (the matrix's peer
## server), the Redisson suite (its tests' waits, ~3.5 min) in the background meanwhile
java-compat: build java-deps java-jar
	@servers=""; for s in $(COMPAT_SERVER_BINS); do [ -x "$$s" ] && servers="$$servers $(CURDIR)/$$s"; done; \
	  [ -n "$$servers" ] || servers=redis-server; \
	  JAVA_SERVERS="$$servers" MVN="$(MVN)" RL_MODULE=$(CURDIR)/$(MODULE) JAVA_JAR=$(CURDIR)/$(JAVA_JAR) \
	  bash $(JAVA_PKG)/compat/run.sh

## java-peer-env: SCG_IMPL_JAR, SCG_IMPL_CLASSPATH, REDISSON_IMPL_JAR, REDISSON_IMPL_CLASSPATH and
## REDISSON_WRAP for ../shared/peers/{spring-cloud-gateway,redisson}/run.sh
java-peer-env: java-jar
	@JAVA_JAR=$(CURDIR)/$(JAVA_JAR) bash $(JAVA_PKG)/compat/peer-env.sh

bench-java: build java-deps
	$(MVN_Q) test -Dtest=JavaBench -Dsurefire.failIfNoSpecifiedTests=false \
	  -Dbench.out=$(CURDIR)/bench/CLIENTS.md -Drl.module=$(CURDIR)/$(MODULE)
