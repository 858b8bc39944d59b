package models

import "strings"

// Entry is one downloadable whisper.cpp model: the file ggml-NAME.bin.
type Entry struct {
	Name string
	// SHA1 is the published SHA-1 of the file, lower-case hex; "" when
	// whisper.cpp publishes none (the file is downloaded unverified unless
	// the caller supplies one).
	SHA1 string
	// BaseURL, when set, replaces the default base URL for this model (the
	// tinydiarize model lives in another repository). A base URL the caller
	// configured explicitly wins over it.
	BaseURL string
}

// FileName is the name the model's file has on the server and on disk.
func (e Entry) FileName() string { return FileName(e.Name) }

// FileName returns "ggml-NAME.bin".
func FileName(name string) string { return "ggml-" + name + ".bin" }

// Catalog lists the models Pull knows, in the order whisper.cpp lists them.
type Catalog []Entry

// Lookup finds the entry named name.
func (c Catalog) Lookup(name string) (Entry, bool) {
	for _, e := range c {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// Names lists the catalog's names, comma-separated.
func (c Catalog) Names() string {
	names := make([]string, len(c))
	for i, e := range c {
		names[i] = e.Name
	}
	return strings.Join(names, ", ")
}

// tinydiarizeURL is where download-ggml-model.sh fetches the -tdrz models.
const tinydiarizeURL = "https://huggingface.co/akashmjn/tinydiarize-whisper.cpp/resolve/main"

// DefaultCatalog is whisper.cpp's list of pre-converted models: every model
// its models/download-ggml-model.sh offers, with the SHA-1 from the
// "Available models" table of its models/README.md (ggml-org/whisper.cpp,
// commit 41e789ee591d). The quantized q5_1, q8_0 and some q5_0 files the
// script offers are not in that table: they carry no checksum.
func DefaultCatalog() Catalog {
	return Catalog{
		{Name: "tiny", SHA1: "bd577a113a864445d4c299885e0cb97d4ba92b5f"},
		{Name: "tiny.en", SHA1: "c78c86eb1a8faa21b369bcd33207cc90d64ae9df"},
		{Name: "tiny-q5_1"},
		{Name: "tiny.en-q5_1"},
		{Name: "tiny-q8_0"},
		{Name: "base", SHA1: "465707469ff3a37a2b9b8d8f89f2f99de7299dac"},
		{Name: "base.en", SHA1: "137c40403d78fd54d454da0f9bd998f78703390c"},
		{Name: "base-q5_1"},
		{Name: "base.en-q5_1"},
		{Name: "base-q8_0"},
		{Name: "small", SHA1: "55356645c2b361a969dfd0ef2c5a50d530afd8d5"},
		{Name: "small.en", SHA1: "db8a495a91d927739e50b3fc1cc4c6b8f6c2d022"},
		{Name: "small.en-tdrz", SHA1: "b6c6e7e89af1a35c08e6de56b66ca6a02a2fdfa1", BaseURL: tinydiarizeURL},
		{Name: "small-q5_1"},
		{Name: "small.en-q5_1"},
		{Name: "small-q8_0"},
		{Name: "medium", SHA1: "fd9727b6e1217c2f614f9b698455c4ffd82463b4"},
		{Name: "medium.en", SHA1: "8c30f0e44ce9560643ebd10bbe50cd20eafd3723"},
		{Name: "medium-q5_0"},
		{Name: "medium.en-q5_0"},
		{Name: "medium-q8_0"},
		{Name: "large-v1", SHA1: "b1caaf735c4cc1429223d5a74f0f4d0b9b59a299"},
		{Name: "large-v2", SHA1: "0f4c8e34f21cf1a914c59d8b3ce882345ad349d6"},
		{Name: "large-v2-q5_0", SHA1: "00e39f2196344e901b3a2bd5814807a769bd1630"},
		{Name: "large-v2-q8_0"},
		{Name: "large-v3", SHA1: "ad82bf6a9043ceed055076d0fd39f5f186ff8062"},
		{Name: "large-v3-q5_0", SHA1: "e6e2ed78495d403bef4b7cff42ef4aaadcfea8de"},
		{Name: "large-v3-turbo", SHA1: "4af2b29d7ec73d781377bfd1758ca957a807e941"},
		{Name: "large-v3-turbo-q5_0", SHA1: "e050f7970618a659205450ad97eb95a18d69c9ee"},
		{Name: "large-v3-turbo-q8_0"},
	}
}
