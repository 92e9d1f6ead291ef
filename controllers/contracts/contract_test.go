package contracts

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// scheme holds the kinds the Contracts read.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(AddToScheme(s))
	return s
}
