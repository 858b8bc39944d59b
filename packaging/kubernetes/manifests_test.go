// Package kubernetes holds wsched's Kubernetes manifests (a module of its own,
// so that k8s.io/api stays out of the daemon's go.mod); its test decodes
// every manifest strictly into the typed API objects and checks the fields
// the node agent depends on. No cluster is needed.
package kubernetes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// objects decodes every document of every manifest, strictly (unknown or
// misspelt fields are errors), keyed "Kind/namespace/name".
func objects(t *testing.T) map[string]any {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	out := map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s#%d: %v", f, i, err)
			}
			var obj interface{ GetName() string }
			switch meta.APIVersion + " " + meta.Kind {
			case "v1 Namespace":
				obj = &corev1.Namespace{}
			case "v1 ServiceAccount":
				obj = &corev1.ServiceAccount{}
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			case "apps/v1 DaemonSet":
				obj = &appsv1.DaemonSet{}
			case "apps/v1 Deployment":
				obj = &appsv1.Deployment{}
			case "rbac.authorization.k8s.io/v1 ClusterRole":
				obj = &rbacv1.ClusterRole{}
			case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
				obj = &rbacv1.ClusterRoleBinding{}
			default:
				t.Fatalf("%s#%d: unexpected %s %s", f, i, meta.APIVersion, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s#%d (%s): %v", f, i, meta.Kind, err)
			}
			ns := ""
			if o, ok := obj.(interface{ GetNamespace() string }); ok {
				ns = o.GetNamespace()
			}
			key := fmt.Sprintf("%s/%s/%s", meta.Kind, ns, obj.GetName())
			if _, dup := out[key]; dup || obj.GetName() == "" {
				t.Fatalf("%s#%d: %s unnamed or defined twice", f, i, key)
			}
			out[key] = obj
		}
	}
	return out
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no container %s", name)
	}
	return spec.Containers[i]
}

func mounts(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, vm := range c.VolumeMounts {
		m[vm.MountPath] = vm.Name
	}
	return m
}

func TestDaemonSet(t *testing.T) {
	objs := objects(t)
	ds, ok := objs["DaemonSet/wsched-system/wsched"].(*appsv1.DaemonSet)
	if !ok {
		t.Fatal("no DaemonSet wsched-system/wsched")
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || spec.RuntimeClassName == nil || *spec.RuntimeClassName != "nvidia" {
		t.Errorf("hostPID %v, runtimeClassName %v: want true, nvidia", spec.HostPID, spec.RuntimeClassName)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the template", k, v)
		}
	}
	if _, ok := objs["ServiceAccount/wsched-system/"+spec.ServiceAccountName].(*corev1.ServiceAccount); !ok {
		t.Errorf("service account %q not defined", spec.ServiceAccountName)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	daemon, plugin := container(t, spec, "daemon"), container(t, spec, "device-plugin")
	if !slices.Equal(daemon.Args[:1], []string{"serve"}) || !slices.Equal(plugin.Args[:2], []string{"k8s", "device-plugin"}) {
		t.Errorf("args: daemon %v, plugin %v", daemon.Args, plugin.Args)
	}
	dm, pm := mounts(daemon), mounts(plugin)
	if dm["/run/wsched"] == "" || dm["/run/wsched"] != pm["/run/wsched"] {
		t.Errorf("the daemon socket's directory is not shared: %v, %v", dm, pm)
	}
	for _, path := range []string{"/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources"} {
		v, ok := volumes[pm[path]]
		if !ok || v.HostPath == nil || v.HostPath.Path != path {
			t.Errorf("device plugin: %s is not the host's", path)
		}
	}
	for _, c := range spec.Containers {
		for _, vm := range c.VolumeMounts {
			if _, ok := volumes[vm.Name]; !ok {
				t.Errorf("%s mounts undefined volume %s", c.Name, vm.Name)
			}
		}
	}
	cm, ok := objs["ConfigMap/wsched-system/"+volumes["config"].ConfigMap.Name].(*corev1.ConfigMap)
	if !ok || !strings.Contains(cm.Data["wsched.toml"], "[kubernetes]") || !strings.Contains(cm.Data["wsched.toml"], `socket = "/run/wsched/wsched.sock"`) {
		t.Errorf("config map: want wsched.toml with the shared socket and [kubernetes]")
	}
}

func TestRBAC(t *testing.T) {
	objs := objects(t)
	b, ok := objs["ClusterRoleBinding//wsched-node-agent"].(*rbacv1.ClusterRoleBinding)
	if !ok {
		t.Fatal("no ClusterRoleBinding wsched-node-agent")
	}
	if _, ok := objs["ClusterRole//"+b.RoleRef.Name]; !ok {
		t.Errorf("role %s not defined", b.RoleRef.Name)
	}
	for _, s := range b.Subjects {
		if _, ok := objs["ServiceAccount/"+s.Namespace+"/"+s.Name]; !ok {
			t.Errorf("subject %s/%s not defined", s.Namespace, s.Name)
		}
	}
}

func TestSenseVoiceExample(t *testing.T) {
	d, ok := objects(t)["Deployment/default/sensevoice"].(*appsv1.Deployment)
	if !ok {
		t.Fatal("no Deployment default/sensevoice")
	}
	spec := d.Spec.Template.Spec
	c := container(t, spec, "sensevoice")
	if q := c.Resources.Limits["wsched.io/gpu-memory"]; q.Value() != 4 {
		t.Errorf("wsched.io/gpu-memory limit = %v, want 4", q.String())
	}
	if spec.RuntimeClassName == nil || *spec.RuntimeClassName != "nvidia" {
		t.Errorf("runtimeClassName %v, want nvidia", spec.RuntimeClassName)
	}
}
