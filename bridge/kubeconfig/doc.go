// Package kubeconfig judges a kubeconfig by its content alone. The manager
// never builds a client from a kubeconfig a tenant wrote: client-go would
// open the files it names (a token file, a certificate, a key), run the
// command it names and call the auth provider plugin it names, all on the
// manager's own host and with the manager's identity. Judging parses the
// bytes and reads nothing else; a kubeconfig that reaches beyond itself is
// refused wherever CAPXP copies or accepts one.
package kubeconfig
