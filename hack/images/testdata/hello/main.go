// Command hello is the image builder's test binary.
package main

import "fmt"

func main() { fmt.Println("hello") }
