package models

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestDefaultCatalog checks the table's shape and a few entries against
// whisper.cpp's models/README.md.
func TestDefaultCatalog(t *testing.T) {
	cat := DefaultCatalog()
	seen := map[string]bool{}
	withSum := 0
	for _, e := range cat {
		if seen[e.Name] {
			t.Errorf("%s listed twice", e.Name)
		}
		seen[e.Name] = true
		if e.SHA1 == "" {
			continue
		}
		withSum++
		if b, err := hex.DecodeString(e.SHA1); err != nil || len(b) != 20 || strings.ToLower(e.SHA1) != e.SHA1 {
			t.Errorf("%s: SHA-1 %q is not 40 lower-case hex digits", e.Name, e.SHA1)
		}
	}
	if len(cat) != 30 || withSum != 16 {
		t.Errorf("%d models, %d with a checksum; want 30 and 16", len(cat), withSum)
	}
	for name, sum := range map[string]string{
		"tiny":                "bd577a113a864445d4c299885e0cb97d4ba92b5f",
		"large-v3-turbo":      "4af2b29d7ec73d781377bfd1758ca957a807e941",
		"large-v3-turbo-q5_0": "e050f7970618a659205450ad97eb95a18d69c9ee",
		"tiny-q8_0":           "",
	} {
		if e, ok := cat.Lookup(name); !ok || e.SHA1 != sum {
			t.Errorf("%s: %+v, %v", name, e, ok)
		}
	}
	if e, _ := cat.Lookup("small.en-tdrz"); e.BaseURL != tinydiarizeURL {
		t.Errorf("small.en-tdrz base URL %q", e.BaseURL)
	}
	if got := (Catalog{{Name: "a"}, {Name: "b"}}).Names(); got != "a, b" {
		t.Errorf("Names() = %q", got)
	}
}
