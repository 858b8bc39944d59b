//go:build ignore

// Command gensensevoice writes a generated SenseVoice model directory (model.onnx, tokens.txt) for
// the sherpa-onnx backend: the weightless stand-in that make systemd-test transcribes with. It is
// run from the repository root, in the main module, with
//
//	go run packaging/test/gensensevoice/main.go DIR
package main

import (
	"fmt"
	"os"

	"github.com/wsched/wsched/estimator/onnx/onnxtest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gensensevoice DIR")
		os.Exit(2)
	}
	if err := os.MkdirAll(os.Args[1], 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "gensensevoice:", err)
		os.Exit(1)
	}
	if _, err := onnxtest.WriteSenseVoice(os.Args[1], onnxtest.SenseVoiceOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "gensensevoice:", err)
		os.Exit(1)
	}
}
