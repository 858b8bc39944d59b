package kubernetes

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// driverManifest is dra/driver.yaml, decoded strictly.
type driverManifest struct {
	sa      corev1.ServiceAccount
	role    rbacv1.ClusterRole
	binding rbacv1.ClusterRoleBinding
	vap     admissionv1.ValidatingAdmissionPolicy
	vapb    admissionv1.ValidatingAdmissionPolicyBinding
	ds      appsv1.DaemonSet
}

func readDriver(t *testing.T) *driverManifest {
	t.Helper()
	m := &driverManifest{}
	decode(t, "dra/driver.yaml", &m.sa, &m.role, &m.binding, &m.vap, &m.vapb, &m.ds)
	return m
}

// cliFlag is one flag of `wsched k8s dra-driver --help`.
type cliFlag struct{ def, usage string }

var helpFlag = regexp.MustCompile(`^\s+(?:-\w, )?--([\w-]+)(?: \w+)?\s{2,}(.*)$`)
var helpDefault = regexp.MustCompile(`\(default "([^"]*)"\)`)

// driverFlags builds wsched (or takes $WSCHED_BIN) and parses the flags of
// `wsched k8s dra-driver --help`, its own and the global ones.
func driverFlags(t *testing.T) map[string]cliFlag {
	t.Helper()
	bin := os.Getenv("WSCHED_BIN")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "wsched")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/wsched")
		build.Dir = filepath.Join("..", "..")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/wsched: %v\n%s", err, out)
		}
	}
	out, err := exec.CommandContext(ctx, bin, "k8s", "dra-driver", "--help").Output()
	if err != nil {
		t.Fatalf("wsched k8s dra-driver --help: %v", err)
	}
	flags := map[string]cliFlag{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		m := helpFlag.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		f := cliFlag{usage: m[2]}
		if d := helpDefault.FindStringSubmatch(m[2]); d != nil {
			f.def = d[1]
		}
		flags[m[1]] = f
	}
	if len(flags) < 5 {
		t.Fatalf("no flags parsed from:\n%s", out)
	}
	return flags
}

// argFlags parses a container's args after the subcommand: --name=value
// or --name value.
func argFlags(t *testing.T, args []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			t.Fatalf("args %v: %q is not a flag", args, args[i])
		}
		if n, v, ok := strings.Cut(name, "="); ok {
			out[n] = v
			continue
		}
		if i+1 == len(args) {
			t.Fatalf("args %v: --%s has no value", args, name)
		}
		out[name] = args[i+1]
		i++
	}
	return out
}

// TestDRADriverDaemonSet: the DaemonSet runs `wsched k8s dra-driver` with
// flags the real CLI has; its kubelet, registry and CDI paths are the CLI's
// defaults, mounted from the same host paths; the node's name comes from
// the downward API; the daemon container is the one of ../daemonset.yaml,
// sharing its socket with the driver; the two DaemonSets never share a node.
func TestDRADriverDaemonSet(t *testing.T) {
	m := readDriver(t)
	spec := m.ds.Spec.Template.Spec
	if spec.ServiceAccountName != m.sa.Name || m.sa.Namespace != m.ds.Namespace {
		t.Errorf("service account %q, defined %s/%s", spec.ServiceAccountName, m.sa.Namespace, m.sa.Name)
	}
	for k, v := range m.ds.Spec.Selector.MatchLabels {
		if m.ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the template", k, v)
		}
	}
	drv := container(t, spec, "dra-driver")
	if len(drv.Args) < 2 || !slices.Equal(drv.Args[:2], []string{"k8s", "dra-driver"}) {
		t.Fatalf("driver args %v", drv.Args)
	}
	args := argFlags(t, drv.Args[2:])
	cli := driverFlags(t)
	for name := range args {
		if _, ok := cli[name]; !ok {
			t.Errorf("--%s: not a flag of wsched k8s dra-driver", name)
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	dm := mounts(drv)
	for _, flag := range []string{"plugin-dir", "registry-dir", "cdi-dir"} {
		path := args[flag]
		v, ok := volumes[dm[path]]
		switch {
		case path == "" || path != cli[flag].def:
			t.Errorf("--%s=%q, the driver's default is %q", flag, path, cli[flag].def)
		case !ok || v.HostPath == nil || v.HostPath.Path != path:
			t.Errorf("--%s=%s is not mounted from the same host path (volume %+v)", flag, path, v)
		}
	}
	if e := slices.IndexFunc(drv.Env, func(e corev1.EnvVar) bool { return e.Name == "NODE_NAME" }); e < 0 ||
		drv.Env[e].ValueFrom == nil || drv.Env[e].ValueFrom.FieldRef == nil || drv.Env[e].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("driver env %+v: want NODE_NAME from spec.nodeName", drv.Env)
	} else if !strings.Contains(cli["node"].usage, "$NODE_NAME") {
		t.Errorf("--node (%q) does not default to $NODE_NAME", cli["node"].usage)
	}
	if _, ok := args["node"]; ok {
		t.Errorf("--node set: it must come from NODE_NAME")
	}
	if cfg := args["config"]; volumes[dm[filepath.Dir(cfg)]].ConfigMap == nil {
		t.Errorf("--config=%s is not on the config map's volume", cfg)
	}

	// The daemon: the same container and volumes as ../daemonset.yaml.
	main, ok := objects(t)["DaemonSet/wsched-system/wsched"].(*appsv1.DaemonSet)
	if !ok {
		t.Fatal("no DaemonSet wsched-system/wsched")
	}
	mspec := main.Spec.Template.Spec
	daemon := container(t, spec, "daemon")
	if !reflect.DeepEqual(daemon, container(t, mspec, "daemon")) {
		t.Errorf("the daemon container differs from daemonset.yaml's")
	}
	for _, vm := range daemon.VolumeMounts {
		mv := mspec.Volumes[slices.IndexFunc(mspec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })]
		if !reflect.DeepEqual(volumes[vm.Name], mv) {
			t.Errorf("volume %s differs from daemonset.yaml's", vm.Name)
		}
	}
	if dm["/run/wsched"] == "" || dm["/run/wsched"] != mounts(daemon)["/run/wsched"] || volumes[dm["/run/wsched"]].EmptyDir == nil {
		t.Errorf("the daemon's socket directory is not shared with the driver")
	}
	if spec.HostPID != mspec.HostPID || !reflect.DeepEqual(spec.RuntimeClassName, mspec.RuntimeClassName) {
		t.Errorf("hostPID/runtimeClassName differ from daemonset.yaml's")
	}
	onePerNode(t, spec, mspec)
	for _, c := range spec.Containers {
		for _, vm := range c.VolumeMounts {
			if _, ok := volumes[vm.Name]; !ok {
				t.Errorf("%s mounts undefined volume %s", c.Name, vm.Name)
			}
		}
	}
}

// onePerNode: the DRA DaemonSet selects wsched.io/dra=true and the main
// one refuses it (two daemons on one node would share GPUs and state).
func onePerNode(t *testing.T, dra, main corev1.PodSpec) {
	t.Helper()
	if dra.NodeSelector["wsched.io/dra"] != "true" {
		t.Errorf("DRA DaemonSet nodeSelector %v: want wsched.io/dra=true", dra.NodeSelector)
	}
	for k, v := range main.NodeSelector {
		if dra.NodeSelector[k] != v {
			t.Errorf("DRA DaemonSet lacks the main one's node selector %s=%s", k, v)
		}
	}
	a := main.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatal("daemonset.yaml: no required node affinity keeping it off DRA nodes")
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if !slices.ContainsFunc(term.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
			return e.Key == "wsched.io/dra" && e.Operator == corev1.NodeSelectorOpNotIn && slices.Equal(e.Values, []string{"true"})
		}) {
			t.Errorf("daemonset.yaml: node selector term %+v lets it onto wsched.io/dra=true nodes", term)
		}
	}
}

// TestDRADriverRBAC: the driver's ClusterRole grants exactly the API calls
// the driver makes (dra/api-calls.txt, which k8s/dra's TestAPIServerCalls
// derives from the code), bound to its service account; the admission
// policy keeps its ResourceSlice writes to its own node.
func TestDRADriverRBAC(t *testing.T) {
	m := readDriver(t)
	var granted []string
	for _, r := range m.role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v: unexpected resourceNames/nonResourceURLs", r)
		}
		for _, g := range r.APIGroups {
			if g == "" {
				g = "core"
			}
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("rule %+v: wildcard", r)
					}
					granted = append(granted, g+" "+res+" "+v)
				}
			}
		}
	}
	slices.Sort(granted)
	want := apiCalls(t)
	for _, c := range want {
		if !slices.Contains(granted, c) {
			t.Errorf("the driver calls %q; the ClusterRole does not grant it", c)
		}
	}
	for _, g := range granted {
		if !slices.Contains(want, g) {
			t.Errorf("the ClusterRole grants %q, which the driver never calls (least privilege)", g)
		}
	}
	b := m.binding
	if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != m.role.Name || len(b.Subjects) != 1 ||
		b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != m.sa.Name || b.Subjects[0].Namespace != m.sa.Namespace {
		t.Errorf("binding %+v: want %s to %s/%s", b, m.role.Name, m.sa.Namespace, m.sa.Name)
	}
	user := "system:serviceaccount:" + m.sa.Namespace + ":" + m.sa.Name
	if m.vapb.Spec.PolicyName != m.vap.Name || !slices.Contains(m.vapb.Spec.ValidationActions, admissionv1.Deny) {
		t.Errorf("policy binding %+v", m.vapb.Spec)
	}
	if len(m.vap.Spec.MatchConditions) != 1 || !strings.Contains(m.vap.Spec.MatchConditions[0].Expression, `"`+user+`"`) {
		t.Errorf("policy match conditions %+v: want the driver's user %s", m.vap.Spec.MatchConditions, user)
	}
	rules := m.vap.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].Resources, []string{"resourceslices"}) ||
		!slices.Contains(rules[0].Operations, admissionv1.Create) || !slices.Contains(rules[0].Operations, admissionv1.Update) {
		t.Errorf("policy rules %+v: want writes of resourceslices", rules)
	}
}

// apiCalls reads dra/api-calls.txt, sorted, without comments.
func apiCalls(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("dra", "api-calls.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatal("dra/api-calls.txt lists no call")
	}
	return out
}
