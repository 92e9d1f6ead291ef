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
