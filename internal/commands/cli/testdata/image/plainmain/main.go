// Command plainmain is a main package that declares no vigil module, for
// vigil image's tests.
package main

func main() {}
