package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Definitions as a reader sees them: field by field differences (apply --dry-run), and YAML
// in the order the API writes a definition (get), which apply reads back unchanged.

// fieldChange is one field a dry run would change: From or To is nil when the field is
// absent on that side.
type fieldChange struct {
	Field string `json:"field"`
	From  any    `json:"from"`
	To    any    `json:"to"`
}

// diffDefinitions compares two definitions field by field ("http.headers.X-Team"), in the
// order the server writes them; fields that only the current one has come last.
func diffDefinitions(from, to json.RawMessage) ([]fieldChange, error) {
	a, err := leaves(from)
	if err != nil {
		return nil, fmt.Errorf("read the current definition: %w", err)
	}
	b, err := leaves(to)
	if err != nil {
		return nil, fmt.Errorf("read the new definition: %w", err)
	}
	old := make(map[string]any, len(a))
	for _, l := range a {
		old[l.path] = l.value
	}
	var out []fieldChange
	seen := make(map[string]bool, len(b))
	for _, l := range b {
		seen[l.path] = true
		if o, ok := old[l.path]; !ok || renderValue(o) != renderValue(l.value) {
			out = append(out, fieldChange{Field: l.path, From: plain(o), To: plain(l.value)})
		}
	}
	for _, l := range a {
		if !seen[l.path] {
			out = append(out, fieldChange{Field: l.path, From: plain(l.value)})
		}
	}
	return out, nil
}

type leaf struct {
	path  string
	value any
}

// leaves flattens a JSON object into its scalar and list values, each with its dotted path.
func leaves(raw json.RawMessage) ([]leaf, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	v, err := orderedJSON(raw)
	if err != nil {
		return nil, err
	}
	var out []leaf
	var walk func(path string, v any)
	walk = func(path string, v any) {
		m, ok := v.(orderedMap)
		if !ok || len(m) == 0 {
			out = append(out, leaf{path, v})
			return
		}
		for _, it := range m {
			k := it.Key
			if path != "" {
				k = path + "." + k
			}
			walk(k, it.Value)
		}
	}
	walk("", v)
	return out, nil
}

// renderValue writes a definition's value for a diff line: strings quoted, lists and
// mappings inline, an absent value as (none).
func renderValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "(none)"
	case string:
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = renderValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case orderedMap:
		parts := make([]string, len(v))
		for i, it := range v {
			parts[i] = fmt.Sprintf("%v: %s", it.Key, renderValue(it.Value))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + renderValue(v[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	default:
		return fmt.Sprint(v)
	}
}

// plain turns ordered mappings back into maps, for -o json.
func plain(v any) any {
	switch v := v.(type) {
	case orderedMap:
		m := make(map[string]any, len(v))
		for _, it := range v {
			m[fmt.Sprint(it.Key)] = plain(it.Value)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

// orderedJSON decodes JSON keeping the order of each object's keys (orderedMap), so that a definition reads in the order the API writes
// it, name first; whole numbers stay integers.
func orderedJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return orderedValue(dec)
}

func orderedValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			list := []any{}
			for dec.More() {
				v, err := orderedValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		}
		m := orderedMap{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := orderedValue(dec)
			if err != nil {
				return nil, err
			}
			m = append(m, orderedItem{Key: k.(string), Value: v})
		}
		_, err := dec.Token()
		return m, err
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		return t.Float64()
	}
	return tok, nil
}

// definitionsYAML writes definitions as a file of jobs that apply reads back unchanged.
// A string that another YAML reader (YAML 1.1) would read as something else ("yes", "on")
// comes out quoted, as yaml.v3 writes it.
func definitionsYAML(defs ...json.RawMessage) ([]byte, error) {
	list := make([]any, len(defs))
	for i, d := range defs {
		v, err := orderedJSON(d)
		if err != nil {
			return nil, err
		}
		list[i] = v
	}
	n, err := yamlNode(orderedMap{{Key: "jobs", Value: list}})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}
