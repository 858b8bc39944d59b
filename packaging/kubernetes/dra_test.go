package kubernetes

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// TestDRAManifests decodes dra/*.yaml strictly (DeviceClass, the example
// ResourceClaimTemplate and its Deployment) and checks that they fit
// together: the template asks memory of the class, the pod uses the claim.
func TestDRAManifests(t *testing.T) {
	var class resourcev1.DeviceClass
	var tmpl resourcev1.ResourceClaimTemplate
	var deploy appsv1.Deployment
	decode(t, "dra/deviceclass.yaml", &class)
	decode(t, "dra/claim-example.yaml", &tmpl, &deploy)
	if len(class.Spec.Selectors) != 1 || class.Spec.Selectors[0].CEL == nil ||
		class.Spec.Selectors[0].CEL.Expression != `device.driver == "gpu.wsched.io"` {
		t.Errorf("DeviceClass selectors %+v", class.Spec.Selectors)
	}
	reqs := tmpl.Spec.Spec.Devices.Requests
	if len(reqs) != 1 || reqs[0].Exactly == nil || reqs[0].Exactly.DeviceClassName != class.Name ||
		reqs[0].Exactly.Capacity == nil || !memory4Gi(reqs[0].Exactly.Capacity.Requests["memory"]) {
		t.Fatalf("ResourceClaimTemplate requests %+v", reqs)
	}
	spec := deploy.Spec.Template.Spec
	if len(spec.ResourceClaims) != 1 || spec.ResourceClaims[0].ResourceClaimTemplateName == nil ||
		*spec.ResourceClaims[0].ResourceClaimTemplateName != tmpl.Name {
		t.Fatalf("pod resourceClaims %+v", spec.ResourceClaims)
	}
	if c := spec.Containers[0].Resources.Claims; len(c) != 1 || c[0].Name != spec.ResourceClaims[0].Name {
		t.Errorf("container claims %+v", c)
	}
}

// decode reads the documents of file strictly into objs, in order.
func decode(t *testing.T, file string, objs ...any) {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(data, []byte("\n---\n"))
	if len(docs) != len(objs) {
		t.Fatalf("%s: %d documents, want %d", file, len(docs), len(objs))
	}
	for i, doc := range docs {
		if err := yaml.UnmarshalStrict(doc, objs[i]); err != nil {
			t.Fatalf("%s#%d: %v", file, i, err)
		}
	}
}

func memory4Gi(q resource.Quantity) bool { return q.Cmp(resource.MustParse("4Gi")) == 0 }
