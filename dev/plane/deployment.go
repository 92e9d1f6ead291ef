package plane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// RunDeployment does for a Deployment that a user installed (with clusterctl,
// say) what a kubelet and the cluster's network would do, so that a shipped
// Deployment is tested as shipped: it runs binary (empty: the entrypoint of
// the container's image, pulled from the plane's registry) as one replica
// of the Deployment's first container,
//   - with the identity of the pod's ServiceAccount (a token from the
//     TokenRequest API), so the shipped RBAC is what is enforced;
//   - with the container's arguments and environment, $(VAR) references
//     and the downward API's metadata.namespace and metadata.name resolved
//     as the kubelet resolves them;
//   - with every Secret volume written to a folder, and arguments naming a
//     mount path pointed at that folder;
//   - with every container port moved to a free loopback port (a pod has
//     its own network namespace; this process shares the host's), in the
//     arguments that name it;
//   - ready when the readiness probe answers, and stopped when the
//     Deployment is gone;
//   - reached through a Service that selects its pod template's labels
//     (ServiceAddress), as the cluster's network would route it.
//
// Two parts of a cluster do not run here and are stood in for, each
// documented in docs/install.md: cert-manager (the plane issues the
// Certificate a mounted Secret comes from, signed by its own CA, before the
// pod starts) and the Service in front of the webhook (the plane passes
// --webhook-url and --webhook-ca-bundle-file, which take precedence over
// the shipped --webhook-service and CA injection).
func (p *Plane) RunDeployment(ctx context.Context, namespace, name, binary string) error {
	return p.runReplica(ctx, namespace, name, binary, func(proc *process) { p.manager = proc })
}

// RunDeploymentBeside runs a Deployment's replica as RunDeployment does,
// beside the one RunDeployment runs (a runtime extension beside CAPXP's
// manager): StopDeployment leaves it running, and it stops with its
// Deployment or with the plane.
func (p *Plane) RunDeploymentBeside(ctx context.Context, namespace, name, binary string) error {
	return p.runReplica(ctx, namespace, name, binary, func(proc *process) { p.procs = append(p.procs, proc) })
}

// runReplica runs a Deployment's replica (RunDeployment), handing its
// process to keep as soon as it starts.
func (p *Plane) runReplica(ctx context.Context, namespace, name, binary string, keep func(*process)) error {
	d := &appsv1.Deployment{}
	if err := p.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil {
		return errors.Wrapf(err, "cannot get Deployment %s/%s", namespace, name)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) == 0 {
		return errors.Errorf("Deployment %s/%s has no container", namespace, name)
	}
	c := pod.Containers[0]
	if binary == "" {
		// The image the Deployment names, as a node pulls it.
		var err error
		if binary, err = p.imageEntrypoint(ctx, c.Image); err != nil {
			return errors.Wrapf(err, "Deployment %s/%s", namespace, name)
		}
	}
	podName := name + "-local"
	dir := filepath.Join(p.dir, "pods", podName)

	kubeconfig, err := p.serviceAccountKubeconfig(ctx, namespace, pod.ServiceAccountName, dir)
	if err != nil {
		return err
	}
	env := map[string]string{}
	var envList []string
	for _, e := range c.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil {
			switch {
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace":
				v = namespace
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name":
				v = podName
			default:
				return errors.Errorf("container %s: env %s comes from a source this plane does not provide", c.Name, e.Name)
			}
		}
		env[e.Name] = v
		envList = append(envList, e.Name+"="+v)
	}
	args := make([]string, 0, len(c.Command)+len(c.Args))
	// The command's first word is the binary; a container without a
	// command runs its image's entrypoint with its arguments.
	words := c.Args
	if len(c.Command) > 0 {
		words = append(append([]string{}, c.Command[1:]...), c.Args...)
	}
	for _, a := range words {
		args = append(args, expand(a, env))
	}

	// Secret volumes, with the Secrets' issuers stood in for.
	mounts := map[string]string{}
	for i := range pod.Volumes {
		v := &pod.Volumes[i]
		if v.Secret == nil {
			continue
		}
		if err := p.issueCertificate(ctx, namespace, v.Secret.SecretName); err != nil {
			return err
		}
		s := &corev1.Secret{}
		if err := p.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: v.Secret.SecretName}, s); err != nil {
			return errors.Wrapf(err, "volume %s: cannot get Secret %s", v.Name, v.Secret.SecretName)
		}
		vd := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(vd, 0o700); err != nil {
			return errors.Wrap(err, "cannot create a volume folder")
		}
		for k, b := range s.Data {
			if err := os.WriteFile(filepath.Join(vd, k), b, 0o600); err != nil {
				return errors.Wrapf(err, "cannot write %s of volume %s", k, v.Name)
			}
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				mounts[m.MountPath] = vd
			}
		}
	}
	// Ports, and mount paths, in the arguments.
	ports := map[int32]int{}
	for _, cp := range c.Ports {
		free, err := freePort()
		if err != nil {
			return err
		}
		ports[cp.ContainerPort] = free
	}
	for i, a := range args {
		args[i] = remap(a, ports, mounts)
	}
	// The webhook server's Service and CA injection, stood in for.
	if webhook, ok := ports[portNamed(c, "webhook-server")]; ok {
		args = append(args, "--webhook-url=https://"+hostPort(webhook))
		for _, a := range args {
			if dir, ok := strings.CutPrefix(a, "--webhook-cert-dir="); ok {
				args = append(args, "--webhook-ca-bundle-file="+filepath.Join(dir, tlsCA))
				break
			}
		}
	}
	proc, err := startProcess(p.dir, podName, binary, append(envList, "KUBECONFIG="+kubeconfig), args...)
	if err != nil {
		return err
	}
	keep(proc)
	served := map[int32]string{}
	for cp, free := range ports {
		served[cp] = hostPort(free)
	}
	p.pods.add(localPod{namespace: namespace, name: podName, labels: d.Spec.Template.Labels, ports: containerPorts(c), served: served})
	// The pod goes with its Deployment, given its grace period.
	grace := 30 * time.Second
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	go func() { //nolint:gosec // the watch outlives the call's context: it ends with the process
		for {
			select {
			case <-proc.done:
				return
			case <-time.After(time.Second):
			}
			cur := &appsv1.Deployment{}
			err := p.client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cur)
			if apierrors.IsNotFound(err) {
				proc.stop(grace)
				return
			}
			// Scaled to zero (clusterctl upgrade does, before it replaces
			// the components): the pod goes, and the status says so.
			if err == nil && cur.Spec.Replicas != nil && *cur.Spec.Replicas == 0 {
				proc.stop(grace)
				_ = p.recordReplicas(context.Background(), cur, 0)
				return
			}
		}
	}()
	if r := c.ReadinessProbe; r != nil && r.HTTPGet != nil {
		port := ports[portNamed(c, r.HTTPGet.Port.String())]
		if r.HTTPGet.Port.IntValue() != 0 {
			port = ports[int32(r.HTTPGet.Port.IntValue())] //nolint:gosec // a container port fits
		}
		if err := proc.waitHealthy(ctx, fmt.Sprintf("http://%s%s", hostPort(port), r.HTTPGet.Path), 2*time.Minute); err != nil {
			return err
		}
	}
	return p.recordReplicas(ctx, d, 1)
}

// recordReplicas writes what the deployment controller writes once the
// pods of a Deployment's current template are ready, or gone: n replicas,
// updated and available, of the observed generation (what `kubectl rollout
// status` and clusterctl's scale-down wait for).
func (p *Plane) recordReplicas(ctx context.Context, d *appsv1.Deployment, n int32) error {
	return errors.Wrapf(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &appsv1.Deployment{}
		if err := p.client.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			return err
		}
		if cur.Generation != d.Generation {
			// A newer template than the one this pod runs.
			return nil
		}
		now := metav1.Now()
		cur.Status.ObservedGeneration = cur.Generation
		cur.Status.Replicas, cur.Status.UpdatedReplicas, cur.Status.ReadyReplicas, cur.Status.AvailableReplicas = n, n, n, n
		cur.Status.UnavailableReplicas = 0
		cur.Status.Conditions = []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		}
		return p.client.Status().Update(ctx, cur)
	}), "cannot record the rollout of Deployment %s/%s", d.Namespace, d.Name)
}

// portNamed is the container port of a name, or the number a name spells.
func portNamed(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	n, _ := strconv.Atoi(name)
	return int32(n) //nolint:gosec // a port number fits
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand resolves $(VAR) references to the container's environment as the
// kubelet does: unknown references stay as they are.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := env[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

// remap points a --flag=value argument at the loopback port a container
// port moved to (":PORT", "0.0.0.0:PORT" or "PORT") and at the folder a
// mount path was written to.
func remap(arg string, ports map[int32]int, mounts map[string]string) string {
	flag, val, ok := strings.Cut(arg, "=")
	if !ok || !strings.HasPrefix(flag, "--") {
		return arg
	}
	if m, ok := mounts[val]; ok {
		return flag + "=" + m
	}
	host, port := "", val
	if i := strings.LastIndex(val, ":"); i >= 0 {
		host, port = val[:i], val[i+1:]
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return arg
	}
	free, ok := ports[int32(n)] //nolint:gosec // a port number fits
	if !ok || (host != "" && host != "0.0.0.0") {
		return arg
	}
	if host == "" && !strings.Contains(val, ":") {
		return fmt.Sprintf("%s=%d", flag, free)
	}
	return flag + "=" + hostPort(free)
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as a
// ServiceAccount with a token from the TokenRequest API.
func (p *Plane) serviceAccountKubeconfig(ctx context.Context, namespace, sa, dir string) (string, error) {
	if sa == "" {
		sa = "default"
	}
	cs, err := kubernetes.NewForConfig(p.mgmt.Config)
	if err != nil {
		return "", errors.Wrap(err, "cannot create a clientset")
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", errors.Wrapf(err, "cannot get a token of ServiceAccount %s/%s", namespace, sa)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["plane"] = &clientcmdapi.Cluster{Server: p.mgmt.Config.Host, CertificateAuthorityData: p.mgmt.Config.CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["pod"] = &clientcmdapi.Context{Cluster: "plane", AuthInfo: sa, Namespace: namespace}
	cfg.CurrentContext = "pod"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", errors.Wrap(err, "cannot create the pod's folder")
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, errors.Wrap(clientcmd.WriteToFile(*cfg, path), "cannot write the pod's kubeconfig")
}

var certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// issueCertificate does what cert-manager does for a Certificate whose
// Secret is missing: it writes tls.crt, tls.key and ca.crt for its DNS
// names (and loopback), here signed by a CA of the plane. Secrets that no
// Certificate names are left alone.
func (p *Plane) issueCertificate(ctx context.Context, namespace, secret string) error {
	if err := p.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secret}, &corev1.Secret{}); err == nil {
		return nil
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(certificateGVK.GroupVersion().WithKind("CertificateList"))
	if err := p.client.List(ctx, l, client.InNamespace(namespace)); err != nil {
		return errors.Wrap(err, "cannot list Certificates")
	}
	for _, c := range l.Items {
		if s, _, _ := unstructured.NestedString(c.Object, "spec", "secretName"); s != secret {
			continue
		}
		names, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		ca, err := newAuthority("cert-manager-" + c.GetName())
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp(p.dir, "certificate-")
		if err != nil {
			return errors.Wrap(err, "cannot create a certificate folder")
		}
		names = append(names, secret)
		if err := ca.serve(dir, names[0], names[1:]...); err != nil {
			return err
		}
		data := map[string][]byte{}
		for _, k := range []string{tlsCert, tlsKey, tlsCA} {
			if data[k], err = os.ReadFile(filepath.Join(dir, k)); err != nil {
				return errors.Wrapf(err, "cannot read %s", k)
			}
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secret,
			Annotations: map[string]string{"cert-manager.io/certificate-name": c.GetName()}},
			Type: corev1.SecretTypeTLS, Data: data}
		if err := p.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "cannot create Secret %s of Certificate %s", secret, c.GetName())
		}
		return nil
	}
	return nil
}

// StopDeployment stops the replica RunDeployment started, as the kubelet
// stops a pod whose Deployment is gone.
func (p *Plane) StopDeployment() {
	if p.manager != nil {
		p.manager.stop(30 * time.Second)
		p.manager = nil
	}
}
