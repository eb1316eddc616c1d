// Command retrylens tells, from a gateway's access logs, whether client retries rescued
// requests or fuelled an incident. See README.md.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
