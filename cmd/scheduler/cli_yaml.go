package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// One YAML library reads and writes job files: go.yaml.in/yaml/v3. A file is read as a tree
// of nodes, turned into the API's JSON by yamlToJSON, so that every key is the string it is
// written as (YAML 1.2: on, yes, no and off are keys, never booleans), a key written twice in
// one mapping is refused with its lines, and values keep YAML 1.2's types (only true and false
// are booleans).

// yamlToJSON converts one YAML document to JSON. An empty document is null.
func yamlToJSON(data []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return []byte("null"), nil
	}
	v, err := yamlValue(doc.Content[0])
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func yamlValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.AliasNode:
		return yamlValue(n.Alias)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlValue(n.Content[0])
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := yamlValue(c)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	case yaml.MappingNode:
		m := map[string]any{}
		line := map[string]int{}
		if err := yamlMapping(n, m, line, false); err != nil {
			return nil, err
		}
		return m, nil
	}
	// A scalar.
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// yamlMapping adds mapping n's keys to m. A merge key (<<: *base) adds the keys the mapping
// does not write itself.
func yamlMapping(n *yaml.Node, m map[string]any, line map[string]int, merged bool) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			src := val
			if src.Kind == yaml.AliasNode {
				src = src.Alias
			}
			srcs := []*yaml.Node{src}
			if src.Kind == yaml.SequenceNode {
				srcs = src.Content
			}
			for _, s := range srcs {
				if s.Kind == yaml.AliasNode {
					s = s.Alias
				}
				if s.Kind != yaml.MappingNode {
					return fmt.Errorf("line %d: <<: merges a mapping (<<: *name), not %s", val.Line, s.ShortTag())
				}
				if err := yamlMapping(s, m, line, true); err != nil {
					return err
				}
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: a key is a word such as name or schedule, not a list or a mapping", k.Line)
		}
		key := k.Value
		if at, dup := line[key]; dup {
			if merged {
				continue // the mapping's own key wins over a merged one
			}
			if at > 0 {
				return fmt.Errorf("line %d: key %q is written twice in one mapping (first at line %d); keep one", k.Line, key, at)
			}
		}
		v, err := yamlValue(val)
		if err != nil {
			return err
		}
		m[key] = v
		if merged {
			line[key] = -1 // from a merge: the mapping itself may still write it
		} else {
			line[key] = k.Line
		}
	}
	return nil
}

// orderedMap is a JSON object with its keys in the order they came in, so that a definition
// reads in the order the API writes it, name first.
type orderedMap []orderedItem

type orderedItem struct {
	Key   string
	Value any
}

// yamlNode builds the YAML of a value made of orderedMap, lists and scalars.
func yamlNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case orderedMap:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, it := range v {
			val, err := yamlNode(it.Value)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: it.Key}, val)
		}
		return n, nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range v {
			val, err := yamlNode(e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, val)
		}
		return n, nil
	}
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	return n, nil
}

// yamlProblem says what YAML refused in a file, in its words.
func yamlProblem(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return "not valid YAML: " + msg
}
