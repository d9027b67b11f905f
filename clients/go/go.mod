module github.com/redis-ratelimit/redis-ratelimit/clients/go

go 1.22

require (
	github.com/redis/go-redis/v9 v9.17.3
	github.com/ulule/limiter/v3 v3.11.2
	golang.org/x/time v0.5.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/stretchr/testify v1.8.3 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
