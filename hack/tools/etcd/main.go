// Command etcd is the etcd server, built from the Go module proxy so that the
// project's tests do not need a downloaded release binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
