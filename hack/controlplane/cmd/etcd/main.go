// Command etcd is upstream go.etcd.io/etcd/server/v3 (same as etcd's server/main.go), built at the
// exact etcd version that k8s.io/kubernetes's module graph already uses.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
