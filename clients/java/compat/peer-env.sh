#!/usr/bin/env bash
# Prints the export lines that point the Java kit (../shared/peers/README-java.md) at the drop-ins:
#   eval "$(make -s java-peer-env)"
# SCG's kit has Lettuce and Reactor on its classpath already (Spring Boot's); Redisson's needs
# Lettuce and its own dependencies (Netty comes with Redisson).
# env: JAVA_JAR (the package's jar), MVN (default mvn)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
JAR=${JAVA_JAR:?JAVA_JAR is the package jar (make java-jar)}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
# Lettuce's own runtime dependencies, minus the Netty Redisson brings (one Netty on the classpath)
"${MVN:-mvn}" -B -ntp -q -f "$HERE/../pom.xml" dependency:build-classpath -Dmdep.outputFile="$OUT" \
  -Dmdep.includeScope=runtime -DexcludeScope=provided -DexcludeGroupIds=io.netty,org.junit.jupiter,org.junit.platform >/dev/null
CP=$(tr ':' '\n' <"$OUT" | grep -E '/(lettuce-core|redis-authx-core|reactor-core|jspecify)-' | paste -sd:)
echo "export SCG_IMPL_JAR=$JAR"
echo "export SCG_IMPL_CLASSPATH="
echo "export REDISSON_IMPL_JAR=$JAR"
echo "export REDISSON_IMPL_CLASSPATH=$CP"
echo "export REDISSON_WRAP=io.github.redisratelimit.redisson.RedissonRateLimiters"
