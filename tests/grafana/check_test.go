package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shippedDashboard is the dashboard the project ships, relative to this module.
var shippedDashboard = filepath.Join("..", "..", "docs", "grafana", "shoal.json")

func readShipped(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(shippedDashboard)
	if err != nil {
		t.Fatalf("read %s: %v", shippedDashboard, err)
	}
	return raw
}

func TestShippedDashboardPasses(t *testing.T) {
	sum, problems := Check(readShipped(t))
	if len(problems) > 0 {
		t.Fatalf("%s fails:\n%s", shippedDashboard, strings.Join(problems, "\n"))
	}
	if sum.Panels == 0 || sum.Queries < sum.Panels || sum.Rows == 0 {
		t.Fatalf("implausible summary, did the decode see the panels? %+v", sum)
	}
}

// TestImportSubstitutesLikeGrafana pins the simulated import to what Grafana's import
// does: declared ${NAME} replaced in string values wherever they are (not in keys),
// undeclared ${...} and dashboard variables left alone, __inputs dropped at every level,
// top-level __requires and __elements dropped, numbers kept as written.
func TestImportSubstitutesLikeGrafana(t *testing.T) {
	in := []byte(`{
		"__inputs": [{"name": "DS_P", "type": "datasource", "pluginId": "prometheus"},
		             {"name": "VAR_C", "type": "constant", "value": "c1"}],
		"__requires": [{"type": "grafana", "id": "grafana"}],
		"__elements": {},
		"a": {"uid": "${DS_P}", "${DS_P}": "key stays", "nested": {"__inputs": [1]}},
		"b": ["x-${VAR_C}-${DS_P}", "${DS_OTHER}", "$instance ${instance}", 12345678901, null, true]
	}`)
	imp, err := Import(in)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	dec := json.NewDecoder(bytes.NewReader(imp.Stored))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"__inputs", "__requires", "__elements"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s kept", k)
		}
	}
	a := got["a"].(map[string]any)
	if a["uid"] != "imported-ds_p" || a["${DS_P}"] != "key stays" {
		t.Errorf("a = %v", a)
	}
	if _, ok := a["nested"].(map[string]any)["__inputs"]; ok {
		t.Errorf("nested __inputs kept")
	}
	b := got["b"].([]any)
	want := []any{"x-c1-imported-ds_p", "${DS_OTHER}", "$instance ${instance}", json.Number("12345678901"), nil, true}
	for i := range want {
		if b[i] != want[i] {
			t.Errorf("b[%d] = %#v, want %#v", i, b[i], want[i])
		}
	}
	if len(imp.Inputs) != 2 || imp.Inputs[0].PluginID != "prometheus" || imp.Inputs[1].Value != "c1" {
		t.Errorf("inputs = %+v", imp.Inputs)
	}
}

// doc is a decoded dashboard that a test breaks.
type doc = map[string]any

func obj(v any) doc   { return v.(doc) }
func arr(v any) []any { return v.([]any) }

func panel(d doc, i int) doc         { return obj(arr(d["panels"])[i]) }
func target(d doc, p, t int) doc     { return obj(arr(panel(d, p)["targets"])[t]) }
func gridPos(d doc, p int) doc       { return obj(panel(d, p)["gridPos"]) }
func legend(d doc, p int) doc        { return obj(obj(panel(d, p)["options"])["legend"]) }
func firstInput(d doc) doc           { return obj(arr(d["__inputs"])[0]) }
func setExpr(d doc, p int, e string) { target(d, p, 0)["expr"] = e }

// TestRejectsBrokenCopies breaks one thing at a time in a copy of the shipped dashboard
// and checks that Check rejects it for that reason (every wanted fragment appears in one
// reported problem) and that the command exits 1 on it.
func TestRejectsBrokenCopies(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(d doc)
		raw   func(b []byte) []byte // a textual edit, for what a decoded copy cannot hold
		wants []string
	}{
		// Unknown fields, at each level the schema covers.
		{name: "unknown dashboard field", edit: func(d doc) { d["refreshInterval"] = "30s" },
			wants: []string{"schema:", "unexpected field 'refreshInterval'"}},
		{name: "unknown panel field", edit: func(d doc) { panel(d, 1)["titel"] = "x" },
			wants: []string{"schema: panels[1]", "unexpected field 'titel'"}},
		{name: "unknown timeseries option (panel plugin schema)", edit: func(d doc) { legend(d, 1)["showLegends"] = true },
			wants: []string{"panels[1].options.legend", "unexpected field 'showLegends'"}},
		{name: "unknown custom field config (panel plugin schema)", edit: func(d doc) {
			obj(obj(obj(panel(d, 1)["fieldConfig"])["defaults"])["custom"])["lineWidht"] = 2
		}, wants: []string{"panels[1].fieldConfig.defaults.custom", "unexpected field 'lineWidht'"}},
		{name: "unknown Prometheus query field", edit: func(d doc) { target(d, 1, 0)["exp"] = "up" },
			wants: []string{"panels[1].targets[0]", "unexpected field 'exp'"}},
		{name: "unknown query field in a target without its own datasource", edit: func(d doc) {
			delete(target(d, 1, 0), "datasource")
			target(d, 1, 0)["intervall"] = "1m"
		}, wants: []string{"targets[0]", "unexpected field 'intervall'"}},
		{name: "unknown templating field", edit: func(d doc) { obj(arr(obj(d["templating"])["list"])[0])["multiple"] = true },
			wants: []string{"templating.list[0]", "unexpected field 'multiple'"}},

		// Wrong types.
		{name: "gridPos width as a string", edit: func(d doc) { gridPos(d, 1)["w"] = "8" },
			wants: []string{"schema: panels[1]", "gridPos"}},
		{name: "schemaVersion as a string", edit: func(d doc) { d["schemaVersion"] = "37" },
			wants: []string{"schema: schemaVersion"}},
		{name: "negative panel id", edit: func(d doc) { panel(d, 1)["id"] = -2 },
			wants: []string{"schema: panels[1]", "id"}},
		{name: "expr as a number", edit: func(d doc) { target(d, 1, 0)["expr"] = 1 },
			wants: []string{"panels[1].targets[0]", "expr"}},
		{name: "tags as a string", edit: func(d doc) { d["tags"] = "shoal" },
			wants: []string{"schema: tags"}},

		// Missing required fields.
		{name: "legend without calcs", edit: func(d doc) { delete(legend(d, 1), "calcs") },
			wants: []string{"panels[1].options.legend.calcs", "required field is missing"}},
		{name: "no schemaVersion", edit: func(d doc) { delete(d, "schemaVersion") },
			wants: []string{"schemaVersion", "required field is missing"}},
		{name: "panel without type", edit: func(d doc) { delete(panel(d, 1), "type") },
			wants: []string{"panels[1]", "type"}},
		{name: "variable option without value", edit: func(d doc) {
			delete(obj(obj(arr(obj(d["templating"])["list"])[0])["current"]), "value")
		}, wants: []string{"templating.list[0].current.value", "required field is missing"}},

		// Enum values, which the SDK's Go types do not constrain.
		{name: "legend displayMode outside its enum", edit: func(d doc) { legend(d, 1)["displayMode"] = "lists" },
			wants: []string{"panels[1].options.legend.displayMode", `"lists" is not one of the schema's values`}},
		{name: "query format outside its enum", edit: func(d doc) { target(d, 1, 0)["format"] = "timeseries" },
			wants: []string{"panels[1].targets[0].format", `"timeseries" is not one of the schema's values`}},
		{name: "graphTooltip outside its enum", edit: func(d doc) { d["graphTooltip"] = 7 },
			wants: []string{"graphTooltip", `"7" is not one of the schema's values`}},

		// Datasources and the import's inputs.
		{name: "no __inputs: ${DS_PROMETHEUS} stays unresolved", edit: func(d doc) { delete(d, "__inputs") },
			wants: []string{"panels[1]", "does not resolve to an __inputs datasource", "${DS_PROMETHEUS}"}},
		{name: "input renamed, references not", edit: func(d doc) { firstInput(d)["name"] = "DS_PROM" },
			wants: []string{"does not resolve to an __inputs datasource"}},
		{name: "input of another datasource plugin", edit: func(d doc) { firstInput(d)["pluginId"] = "loki" },
			wants: []string{`datasource type "prometheus", but input DS_PROMETHEUS is a "loki" datasource`}},
		{name: "datasource input without pluginId", edit: func(d doc) { delete(firstInput(d), "pluginId") },
			wants: []string{"import:", "needs a pluginId"}},
		{name: "input type the import form does not know", edit: func(d doc) { firstInput(d)["type"] = "interval" },
			wants: []string{"import:", `type "interval"`}},
		{name: "panel without datasource", edit: func(d doc) { delete(panel(d, 1), "datasource") },
			wants: []string{"panels[1]", "no datasource"}},
		{name: "target with a hard-coded datasource uid", edit: func(d doc) {
			obj(target(d, 1, 0)["datasource"])["uid"] = "P1809F7CD0C75ACF3"
		}, wants: []string{"panels[1]", "targets[0]", "does not resolve", "P1809F7CD0C75ACF3"}},
		{name: "variable without datasource", edit: func(d doc) { delete(obj(arr(obj(d["templating"])["list"])[0]), "datasource") },
			wants: []string{"templating.list[0] (instance)", "no datasource"}},
		{name: "undeclared input referenced in a title", edit: func(d doc) { panel(d, 1)["title"] = "Requests ${DS_LOKI}" },
			wants: []string{"panels[1].title", "${DS_LOKI} is neither an __inputs entry nor a dashboard variable"}},
		{name: "library panels in __elements", edit: func(d doc) { d["__elements"] = doc{"abc": doc{"name": "lib"}} },
			wants: []string{"import:", "__elements"}},

		// Ids and the grid.
		{name: "duplicate panel id", edit: func(d doc) { panel(d, 2)["id"] = panel(d, 1)["id"] },
			wants: []string{"panels[2]", "is also the id of panels[1]"}},
		{name: "duplicate id between a row and a panel", edit: func(d doc) { panel(d, 1)["id"] = panel(d, 0)["id"] },
			wants: []string{"panels[1]", "is also the id of panels[0]"}},
		{name: "panel past column 24", edit: func(d doc) { gridPos(d, 3)["x"] = 20 },
			wants: []string{"panels[3]", "ends at column 28, past the 24-column grid"}},
		{name: "panel wider than the grid (SDK Validate)", edit: func(d doc) { gridPos(d, 1)["w"] = 25 },
			wants: []string{"schema (Validate): panels[1]", "w: must be <= 24"}},
		{name: "zero height", edit: func(d doc) { gridPos(d, 1)["h"] = 0 },
			wants: []string{"panels[1]", "a panel needs a width and a height"}},
		{name: "overlapping panels", edit: func(d doc) { gridPos(d, 2)["x"] = 4 },
			wants: []string{"panels[1]", "panels[2]", "overlap"}},
		{name: "panel without gridPos", edit: func(d doc) { delete(panel(d, 1), "gridPos") },
			wants: []string{"panels[1]", "no gridPos"}},
		{name: "expanded row holding panels", edit: func(d doc) {
			panel(d, 0)["panels"] = []any{panel(d, 1)}
			d["panels"] = append(arr(d["panels"])[:1], arr(d["panels"])[2:]...)
		}, wants: []string{"panels[0]", "an expanded row keeps its panels at the top level"}},

		{name: "collapsed row: its panels are checked too", edit: func(d doc) {
			nested := panel(d, 1)
			nested["id"] = panel(d, 2)["id"]
			panel(d, 0)["collapsed"] = true
			panel(d, 0)["panels"] = []any{nested}
			d["panels"] = append(arr(d["panels"])[:1], arr(d["panels"])[2:]...)
		}, wants: []string{"panels[1]", "is also the id of panels[0].panels[0]"}},

		// Targets.
		{name: "target without expr", edit: func(d doc) { delete(target(d, 1, 0), "expr") },
			wants: []string{"panels[1]", "targets[0]: no expr"}},
		{name: "target with a blank expr", edit: func(d doc) { setExpr(d, 1, "  ") },
			wants: []string{"targets[0]: no expr"}},
		{name: "target without refId", edit: func(d doc) { delete(target(d, 1, 0), "refId") },
			wants: []string{"targets[0]: no refId"}},
		{name: "refId used twice", edit: func(d doc) { target(d, 2, 1)["refId"] = target(d, 2, 0)["refId"] },
			wants: []string{"panels[2]", "targets[1]", `refId "A" used twice`}},
		{name: "panel without targets", edit: func(d doc) { panel(d, 1)["targets"] = []any{} },
			wants: []string{"panels[1]", "no targets"}},
		{name: "undefined variable in a query", edit: func(d doc) {
			setExpr(d, 1, strings.Replace(target(d, 1, 0)["expr"].(string), "$instance", "$instanse", 1))
		}, wants: []string{"panels[1]", "targets[0].expr: $instanse is not a dashboard variable"}},

		// The dashboard itself.
		{name: "panel type Grafana does not ship", edit: func(d doc) { panel(d, 1)["type"] = "timeseris" },
			wants: []string{"panels[1]", `panel type "timeseris"`}},
		{name: "empty title", edit: func(d doc) { d["title"] = " " },
			wants: []string{"title: empty"}},
		{name: "uid Grafana would refuse", edit: func(d doc) { d["uid"] = "shoal overview" },
			wants: []string{`uid: "shoal overview"`}},
		{name: "key given twice", raw: func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"title": "Requests by command",`), []byte(`"title": "Requests by command", "title": "Requests",`), 1)
		}, wants: []string{"panels[1].title: key appears twice"}},
		{name: "trailing data", raw: func(b []byte) []byte { return append(b, []byte("{}")...) },
			wants: []string{"not valid JSON"}},
	}

	shipped := readShipped(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			broken := shipped
			if tc.edit != nil {
				var d doc
				dec := json.NewDecoder(bytes.NewReader(shipped))
				dec.UseNumber()
				if err := dec.Decode(&d); err != nil {
					t.Fatal(err)
				}
				tc.edit(d)
				var err error
				if broken, err = json.Marshal(d); err != nil {
					t.Fatal(err)
				}
			}
			if tc.raw != nil {
				broken = tc.raw(shipped)
				if bytes.Equal(broken, shipped) {
					t.Fatal("the textual edit changed nothing")
				}
			}
			_, problems := Check(broken)
			t.Logf("%d problem(s):\n%s", len(problems), strings.Join(problems, "\n"))
			if !anyContainsAll(problems, tc.wants) {
				t.Fatalf("want a problem containing %q, got:\n%s", tc.wants, strings.Join(problems, "\n"))
			}

			path := filepath.Join(t.TempDir(), "broken.json")
			if err := os.WriteFile(path, broken, 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if status := run([]string{path}, &stdout, &stderr); status != 1 {
				t.Fatalf("exit status %d, want 1; stderr:\n%s", status, stderr.String())
			}
			if !strings.Contains(stderr.String(), "FAILED") || stdout.Len() != 0 {
				t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
			}
		})
	}
}

func TestCommandPassesShippedDashboard(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := run([]string{shippedDashboard}, &stdout, &stderr); status != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", status, stderr.String())
	}
	if !strings.Contains(stdout.String(), ": ok:") {
		t.Fatalf("stdout %q", stdout.String())
	}
	if status := run(nil, &stdout, &stderr); status != 2 {
		t.Fatalf("no arguments: exit status %d, want 2", status)
	}
	if status := run([]string{filepath.Join(t.TempDir(), "missing.json")}, &stdout, &stderr); status != 1 {
		t.Fatalf("missing file: exit status %d, want 1", status)
	}
}

func anyContainsAll(problems, wants []string) bool {
	for _, p := range problems {
		all := true
		for _, w := range wants {
			if !strings.Contains(p, w) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
