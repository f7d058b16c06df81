package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Input is one entry of a dashboard's `__inputs` together with the value that the
// simulated import gives it.
type Input struct {
	// Name is what `${Name}` references in the dashboard are replaced for.
	Name string
	// Type is "datasource" or "constant", the two kinds Grafana's import form asks for.
	Type string
	// PluginID is the datasource plugin a datasource input must be (e.g. "prometheus").
	PluginID string
	// Value is what the import substitutes: the uid of the datasource picked for a
	// datasource input, the input's own default for a constant.
	Value string
}

// Imported is a dashboard after the simulated import: what Grafana would store.
type Imported struct {
	// Stored is the dashboard JSON as the import would save it.
	Stored []byte
	// Inputs are the dashboard's `__inputs`, each with the value that was substituted.
	Inputs []Input
}

// DatasourceUIDPrefix prefixes the uid the simulated import gives a datasource input
// (a user importing the dashboard picks an existing datasource whose uid goes there).
const DatasourceUIDPrefix = "imported-"

// inputReference matches `${...}` the way Grafana's import evaluator does: shortest match,
// only replaced when the name inside is a declared input.
var inputReference = regexp.MustCompile(`\$\{.+?\}`)

// Import does to a dashboard file what Grafana's import does before it saves it
// (POST /api/dashboards/import with one value per `__inputs` entry, as the import page
// sends it): every `${NAME}` in a string value whose NAME is a declared input is replaced
// by the input's value, `__inputs` is dropped wherever it appears, and the top-level
// `__elements` and `__requires` are dropped. A datasource input gets the uid of a
// datasource of its pluginId that the importer picked (DatasourceUIDPrefix + name).
//
// It fails where Grafana's import would, or where this simulation does not model what
// Grafana would do: input types other than datasource and constant, and library panels
// in `__elements`.
func Import(raw []byte) (Imported, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	// Numbers stay as their text, so ids and sizes reach the schema decoder unchanged.
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return Imported{}, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Imported{}, fmt.Errorf("not valid JSON: data after the dashboard object")
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return Imported{}, fmt.Errorf("a dashboard is a JSON object, this is %T", doc)
	}

	inputs, err := readInputs(top["__inputs"])
	if err != nil {
		return Imported{}, err
	}
	values := make(map[string]string, len(inputs))
	for _, in := range inputs {
		values["${"+in.Name+"}"] = in.Value
	}

	if err := checkNoLibraryPanels(top["__elements"]); err != nil {
		return Imported{}, err
	}
	stored := substitute(top, values).(map[string]any)
	delete(stored, "__elements")
	delete(stored, "__requires")

	out, err := json.Marshal(stored)
	if err != nil {
		return Imported{}, err
	}
	return Imported{Stored: out, Inputs: inputs}, nil
}

func readInputs(v any) ([]Input, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("__inputs: must be an array, is %T", v)
	}
	var inputs []Input
	seen := map[string]bool{}
	for i, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("__inputs[%d]: must be an object", i)
		}
		name, _ := obj["name"].(string)
		typ, _ := obj["type"].(string)
		if name == "" {
			return nil, fmt.Errorf("__inputs[%d]: no name", i)
		}
		if seen[name] {
			return nil, fmt.Errorf("__inputs[%d]: %s declared twice", i, name)
		}
		seen[name] = true
		in := Input{Name: name, Type: typ}
		switch typ {
		case "datasource":
			in.PluginID, _ = obj["pluginId"].(string)
			if in.PluginID == "" {
				return nil, fmt.Errorf("__inputs[%d] (%s): a datasource input needs a pluginId, or the import page cannot offer a datasource for it", i, name)
			}
			in.Value = DatasourceUIDPrefix + strings.ToLower(name)
		case "constant":
			in.Value, _ = obj["value"].(string)
		default:
			return nil, fmt.Errorf("__inputs[%d] (%s): type %q; Grafana's import form asks for datasource and constant inputs only", i, name, typ)
		}
		inputs = append(inputs, in)
	}
	return inputs, nil
}

// checkNoLibraryPanels refuses a non-empty `__elements`: importing library panels creates
// them in the Grafana instance, which this simulation does not model.
func checkNoLibraryPanels(v any) error {
	switch e := v.(type) {
	case nil:
		return nil
	case map[string]any:
		if len(e) == 0 {
			return nil
		}
	case []any:
		if len(e) == 0 {
			return nil
		}
	}
	return fmt.Errorf("__elements: library panels are not supported by this check (keep panels inline)")
}

// substitute copies a decoded JSON value with the import's replacements applied to string
// values (never to keys) and `__inputs` dropped from every object.
func substitute(v any, values map[string]string) any {
	switch x := v.(type) {
	case string:
		return inputReference.ReplaceAllStringFunc(x, func(ref string) string {
			if val, ok := values[ref]; ok {
				return val
			}
			return ref
		})
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			if k == "__inputs" {
				continue
			}
			out[k] = substitute(item, values)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = substitute(item, values)
		}
		return out
	default:
		return x
	}
}
