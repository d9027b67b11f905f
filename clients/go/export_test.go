package ratelimit

// ServerAddrForTests is the address of the server the package's tests run against (its examples
// use it).
func ServerAddrForTests() string { return addr }
