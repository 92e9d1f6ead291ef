package plane

import (
	"strings"
	"testing"
)

func TestInitClusterConfiguration(t *testing.T) {
	const clusterConfiguration = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.5\n"
	cloudInit := func(runcmd, path, content string) string {
		indented := "      " + strings.ReplaceAll(strings.TrimSuffix(content, "\n"), "\n", "\n      ")
		return "## template: jinja\n#cloud-config\n\nwrite_files:\n-   path: " + path + "\n    owner: root:root\n    permissions: '0640'\n    content: |\n" +
			indented + "\nruncmd:\n  - '" + runcmd + "'\n"
	}
	initDocs := "---\n" + clusterConfiguration + "---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration: {}\n"
	cases := []struct {
		name    string
		data    string
		want    string
		wantErr string
	}{
		{"InitWritesItsClusterConfiguration", cloudInit("kubeadm init --config /run/kubeadm/kubeadm.yaml", kubeadmConfigFile, initDocs), clusterConfiguration, ""},
		{"JoinUploadsNothing", cloudInit("kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml", "/run/kubeadm/kubeadm-join-config.yaml", "kind: JoinConfiguration\n"), "", ""},
		{"NotKubeadmAtAll", "#cloud-config\n# The local backend registers a Node instead of booting a machine.\n", "", ""},
		{"InitWithoutItsFile", cloudInit("kubeadm init", "/etc/other.yaml", initDocs), "", "writes no " + kubeadmConfigFile},
		{"InitWithoutClusterConfiguration", cloudInit("kubeadm init", kubeadmConfigFile, "kind: InitConfiguration\n"), "", "no ClusterConfiguration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := initClusterConfiguration([]byte(c.data))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestKubeProxy(t *testing.T) {
	cases := map[string]struct {
		clusterConfiguration, version string
		wantImage, wantErr            string
	}{
		"kubeadm's default registry": {
			clusterConfiguration: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n", version: "v1.35.4",
			wantImage: "registry.k8s.io/kube-proxy:v1.35.4"},
		"the configuration's image repository": {
			clusterConfiguration: "kind: ClusterConfiguration\nimageRepository: mirror.example/k8s\n", version: "v1.36.5",
			wantImage: "mirror.example/k8s/kube-proxy:v1.36.5"},
		"build metadata in a tag": {
			clusterConfiguration: "kind: ClusterConfiguration\n", version: "v1.36.5+build.1",
			wantImage: "registry.k8s.io/kube-proxy:v1.36.5_build.1"},
		"a configuration that is not YAML": {
			clusterConfiguration: "imageRepository: [", version: "v1.36.5", wantErr: "cannot parse"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ds, err := kubeProxy(tc.clusterConfiguration, tc.version)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := ds.Spec.Template.Spec.Containers
			if ds.Namespace != "kube-system" || ds.Name != "kube-proxy" || len(c) != 1 || c[0].Name != "kube-proxy" {
				t.Fatalf("got DaemonSet %s/%s with containers %v, want kube-system/kube-proxy with one container kube-proxy", ds.Namespace, ds.Name, c)
			}
			if c[0].Image != tc.wantImage {
				t.Errorf("image %q, want %q", c[0].Image, tc.wantImage)
			}
		})
	}
}
