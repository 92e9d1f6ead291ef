package plane

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// localPod is a pod the plane runs as a local process (a shipped
// Deployment's replica, a provider package's runtime): what a Service that
// selects it reaches.
type localPod struct {
	namespace, name string
	labels          map[string]string
	// ports are its container's ports, by name.
	ports map[string]int32
	// served are the loopback addresses the process serves its container
	// ports at, by container port.
	served map[int32]string
}

// localPods are the pods the plane runs, by namespace/name.
type localPods struct {
	mu   sync.Mutex
	pods map[string]localPod
}

// add records a pod, replacing one of the same name (a restart).
func (l *localPods) add(p localPod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pods == nil {
		l.pods = map[string]localPod{}
	}
	l.pods[p.namespace+"/"+p.name] = p
}

// remove forgets a pod that stopped.
func (l *localPods) remove(namespace, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pods, namespace+"/"+name)
}

// ServiceAddress is where a Service's port reaches, as the cluster's
// network would route it: the loopback address of the first pod the plane
// runs that the Service's selector matches, at the container port its
// target port names. It is an error when the Service has no such port, or
// selects no pod, or the pod does not serve that port: what a user would
// meet as a Service without endpoints.
func (p *Plane) ServiceAddress(ctx context.Context, namespace, name, port string) (string, error) {
	s := &corev1.Service{}
	if err := p.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		return "", errors.Wrapf(err, "cannot get Service %s/%s", namespace, name)
	}
	var target *intstr.IntOrString
	for i := range s.Spec.Ports {
		sp := &s.Spec.Ports[i]
		if sp.Name == port || strconv.Itoa(int(sp.Port)) == port {
			target = &sp.TargetPort
		}
	}
	if target == nil {
		return "", errors.Errorf("Service %s/%s has no port %s", namespace, name, port)
	}
	if len(s.Spec.Selector) == 0 {
		return "", errors.Errorf("Service %s/%s selects no pod: it has no selector", namespace, name)
	}
	selector := labels.SelectorFromSet(s.Spec.Selector)
	p.pods.mu.Lock()
	defer p.pods.mu.Unlock()
	keys := make([]string, 0, len(p.pods.pods))
	for k := range p.pods.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var seen []string
	for _, k := range keys {
		pod := p.pods.pods[k]
		if pod.namespace != namespace || !selector.Matches(labels.Set(pod.labels)) {
			continue
		}
		cp := target.IntVal
		if target.Type == intstr.String {
			var ok bool
			if cp, ok = pod.ports[target.StrVal]; !ok {
				seen = append(seen, fmt.Sprintf("pod %s has no port named %s", pod.name, target.StrVal))
				continue
			}
		}
		addr, ok := pod.served[cp]
		if !ok {
			seen = append(seen, fmt.Sprintf("pod %s serves nothing on its port %d", pod.name, cp))
			continue
		}
		return addr, nil
	}
	if len(seen) > 0 {
		return "", errors.Errorf("Service %s/%s port %s reaches no pod: %s", namespace, name, port, strings.Join(seen, "; "))
	}
	return "", errors.Errorf("Service %s/%s selects no pod the plane runs in %s (selector %s)", namespace, name, namespace, selector)
}

// containerPorts are a container's ports by name.
func containerPorts(c corev1.Container) map[string]int32 {
	out := map[string]int32{}
	for _, cp := range c.Ports {
		if cp.Name != "" {
			out[cp.Name] = cp.ContainerPort
		}
	}
	return out
}
