// Command hashoracle prints upstream Karpenter's NodePool template hash (NodePool.Hash, the
// value upstream stamps as karpenter.sh/nodepool-hash) for NodePool documents.
//
// It is a test tool, never part of the product: hack/hashoracle/gen.sh runs it to regenerate
// the golden table the pure Python hash is checked against, so CI needs no Go.
//
// Input (stdin): NodePool documents as YAML (or JSON), separated by "---" lines, each as the
// API server would serve it (defaults applied). Output (stdout): a JSON array with, for each
// document in order, {"name": metadata.name, "hash": Hash(), "nodePool": the document as JSON}.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"
)

type result struct {
	Name     string          `json:"name"`
	Hash     string          `json:"hash"`
	NodePool json.RawMessage `json:"nodePool"`
}

// documents splits a YAML stream on "---" separator lines, dropping empty documents.
func documents(r io.Reader) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if len(bytes.TrimSpace(cur.Bytes())) > 0 {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " \t") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush()
	return docs, sc.Err()
}

func run() error {
	docs, err := documents(os.Stdin)
	if err != nil {
		return err
	}
	out := []result{}
	for i, doc := range docs {
		raw, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		if string(raw) == "null" {
			continue // only comments
		}
		// Strict: a misspelt field in a case would silently hash as absent.
		var np karpv1.NodePool
		if err := yaml.UnmarshalStrict(doc, &np); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, result{Name: np.Name, Hash: np.Hash(), NodePool: raw})
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "hashoracle:", err)
		os.Exit(1)
	}
}
