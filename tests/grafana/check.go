package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// GridColumns is the width of Grafana's dashboard grid.
const GridColumns = 24

// maxUIDLength is the longest dashboard uid Grafana saves.
const maxUIDLength = 40

func init() {
	// Without the panel and query plugins, the SDK decodes panel options, custom field
	// config and targets as untyped maps and checks nothing in them.
	plugins.RegisterDefaultPlugins()
}

// Summary is what a dashboard that passed holds.
type Summary struct {
	Title         string
	UID           string
	SchemaVersion uint16
	Rows          int
	Panels        int
	Queries       int
	Variables     int
	Inputs        []Input
}

// Check validates a dashboard file as Grafana's import would receive it. It applies the
// import's substitution (Import), strictly decodes the result with the Grafana Foundation
// SDK's types generated from Grafana's dashboard schema (unknown fields, wrong types and
// missing required fields fail, in the timeseries options, custom field config and
// Prometheus targets too) and runs the SDK's Validate. Then it checks what those types
// cannot: enum values (enumSpecs), that every panel's and variable's datasource is the one
// chosen for an `__inputs` entry, unique panel ids, every panel within the 24-column grid
// and overlapping none, an expr and a unique refId on every target, every `$variable` a
// query uses defined, no `${...}` left unresolved, no key given twice, a title, and a uid
// Grafana accepts. It returns every problem found, each with its JSON path (indices are
// the file's); none means the dashboard passed.
func Check(raw []byte) (Summary, []string) {
	var problems []string
	report := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}

	dups, err := DuplicateKeys(raw)
	if err != nil {
		return Summary{}, []string{fmt.Sprintf("not valid JSON: %v", err)}
	}
	for _, d := range dups {
		report("%s: key appears twice in one object (Grafana keeps the last one)", d)
	}

	imp, err := Import(raw)
	if err != nil {
		return Summary{}, append(problems, "import: "+err.Error())
	}

	var strict dashboard.Dashboard
	for _, e := range buildErrors(strict.UnmarshalJSONStrict(imp.Stored)) {
		report("schema: %s", e)
	}
	// The SDK's strict decoders report every problem but keep no value for a part that
	// decodes cleanly (a top-level panel, panel options, a target: each returns an empty
	// but non-nil error list, which its caller takes for a failure). The values come from
	// the SDK's lenient decode of the same JSON, which differs only in what it rejects.
	var dash dashboard.Dashboard
	if err := json.Unmarshal(imp.Stored, &dash); err != nil {
		return Summary{}, append(problems, "checks beyond the schema skipped: the dashboard does not decode: "+err.Error())
	}
	for _, e := range buildErrors(dash.Validate()) {
		report("schema (Validate): %s", e)
	}
	var rawDash struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(imp.Stored, &rawDash); err != nil || len(rawDash.Panels) != len(dash.Panels) {
		return Summary{}, append(problems, "schema: panels: not an array of panel objects")
	}
	panels := dash.Panels

	c := checker{report: report, datasources: map[string]Input{}, ids: map[uint32]string{}, variables: map[string]bool{}}
	for _, in := range imp.Inputs {
		if in.Type == "datasource" {
			c.datasources[in.Value] = in
		}
	}

	sum := Summary{SchemaVersion: dash.SchemaVersion, Inputs: imp.Inputs, Variables: len(dash.Templating.List)}
	if dash.Title != nil {
		sum.Title = *dash.Title
	}
	if strings.TrimSpace(sum.Title) == "" {
		report("title: empty; Grafana refuses to save a dashboard without a title")
	}
	if dash.Uid != nil {
		sum.UID = *dash.Uid
		if !validUID.MatchString(sum.UID) || len(sum.UID) > maxUIDLength {
			report("uid: %q; Grafana saves uids of at most %d letters, digits, '-' and '_'", sum.UID, maxUIDLength)
		}
	}

	for i, v := range dash.Templating.List {
		path := fmt.Sprintf("templating.list[%d] (%s)", i, v.Name)
		if c.variables[v.Name] {
			report("%s: variable name defined twice", path)
		}
		c.variables[v.Name] = true
		if v.Type == dashboard.VariableTypeQuery {
			c.datasource(path, v.Datasource)
		}
	}
	for i, v := range dash.Templating.List {
		if v.Query != nil && v.Query.String != nil {
			c.variableRefs(fmt.Sprintf("templating.list[%d].query", i), *v.Query.String)
		}
		if v.Query != nil && v.Query.Map != nil {
			if q, ok := v.Query.Map["query"].(string); ok {
				c.variableRefs(fmt.Sprintf("templating.list[%d].query.query", i), q)
			}
		}
	}

	var top []box
	for i, p := range panels {
		path := fmt.Sprintf("panels[%d]", i)
		switch {
		case p.RowPanel != nil:
			sum.Rows++
			row := p.RowPanel
			c.id(path, row.Id)
			top = append(top, c.grid(path, row.GridPos))
			if !row.Collapsed && len(row.Panels) > 0 {
				report("%s: an expanded row keeps its panels at the top level, not in its own panels list", path)
			}
			var nestedPanels []json.RawMessage
			var rawRow struct {
				Panels []json.RawMessage `json:"panels"`
			}
			if err := json.Unmarshal(rawDash.Panels[i], &rawRow); err == nil {
				nestedPanels = rawRow.Panels
			}
			var inner []box
			for j := range row.Panels {
				if j >= len(nestedPanels) {
					break
				}
				np := fmt.Sprintf("%s.panels[%d]", path, j)
				inner = append(inner, c.panel(np, &row.Panels[j], nestedPanels[j]))
				sum.Panels++
			}
			c.overlaps(path+".panels", inner)
		case p.Panel != nil:
			top = append(top, c.panel(path, p.Panel, rawDash.Panels[i]))
			sum.Panels++
		}
	}
	c.overlaps("panels", top)
	sum.Queries = c.queries

	c.enums("", reflect.ValueOf(dash))

	var doc any
	if err := json.Unmarshal(imp.Stored, &doc); err == nil {
		c.unresolved("", doc)
	}
	return sum, problems
}

var validUID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// buildErrors flattens an SDK error into one line per problem. The SDK's strict decoders
// return a cog.BuildErrors even when it is empty, which is a success.
func buildErrors(err error) []string {
	if err == nil {
		return nil
	}
	var be cog.BuildErrors
	if errors.As(err, &be) {
		out := make([]string, 0, len(be))
		for _, e := range be {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

// validator is an SDK type with schema constraints beyond its Go types.
type validator interface{ Validate() error }

// box is a panel's rectangle on the grid.
type box struct {
	path       string
	x, y, w, h uint32
}

type checker struct {
	report      func(format string, args ...any)
	datasources map[string]Input // by the uid the import gave them
	ids         map[uint32]string
	variables   map[string]bool
	queries     int
}

func (c *checker) id(path string, id uint32) {
	if other, dup := c.ids[id]; dup {
		c.report("%s: id %d is also the id of %s; Grafana needs panel ids unique within a dashboard", path, id, other)
		return
	}
	c.ids[id] = path
}

func (c *checker) grid(path string, g *dashboard.GridPos) box {
	if g == nil {
		c.report("%s: no gridPos", path)
		return box{}
	}
	if g.W == 0 || g.H == 0 {
		c.report("%s.gridPos: w=%d h=%d; a panel needs a width and a height", path, g.W, g.H)
	}
	if g.X+g.W > GridColumns {
		c.report("%s.gridPos: x=%d w=%d ends at column %d, past the %d-column grid", path, g.X, g.W, g.X+g.W, GridColumns)
	}
	return box{path: path, x: g.X, y: g.Y, w: g.W, h: g.H}
}

// overlaps reports panels laid on top of each other: Grafana's grid would push one down,
// so the dashboard would not look as the file says.
func (c *checker) overlaps(path string, boxes []box) {
	for i := range boxes {
		for j := i + 1; j < len(boxes); j++ {
			a, b := boxes[i], boxes[j]
			if a.path == "" || b.path == "" {
				continue
			}
			if a.x < b.x+b.w && b.x < a.x+a.w && a.y < b.y+b.h && b.y < a.y+a.h {
				c.report("%s: %s and %s overlap on the grid", path, a.path, b.path)
			}
		}
	}
}

// datasource reports a reference that is not the datasource an `__inputs` entry chose.
func (c *checker) datasource(path string, ref *common.DataSourceRef) (Input, bool) {
	if ref == nil {
		c.report("%s: no datasource; Grafana would use the instance's default datasource, whatever it is", path)
		return Input{}, false
	}
	typ, uid := deref(ref.Type), deref(ref.Uid)
	in, ok := c.datasources[uid]
	if !ok {
		c.report("%s: datasource {type %q, uid %q} does not resolve to an __inputs datasource (reference one as ${NAME} with NAME declared in __inputs)", path, typ, uid)
		return Input{}, false
	}
	if typ != in.PluginID {
		c.report("%s: datasource type %q, but input %s is a %q datasource", path, typ, in.Name, in.PluginID)
		return Input{}, false
	}
	return in, true
}

func (c *checker) panel(path string, p *dashboard.Panel, raw json.RawMessage) box {
	if p.Title != nil {
		path = fmt.Sprintf("%s (%q)", path, *p.Title)
	}
	if p.Id == nil {
		c.report("%s: no id", path)
	} else {
		c.id(path, *p.Id)
	}
	if _, known := cog.ConfigForPanelcfgVariant(p.Type); !known {
		c.report("%s: panel type %q is not a panel plugin Grafana ships (or the SDK has no schema for it)", path, p.Type)
	}
	// Dashboard.Validate does not reach into the panel plugin's options and custom field
	// config (they are untyped in the panel schema); validate them as their plugin's types.
	if v, ok := p.Options.(validator); ok {
		for _, e := range buildErrors(v.Validate()) {
			c.report("schema (Validate): %s.options: %s", path, e)
		}
	}
	if p.FieldConfig != nil {
		if v, ok := p.FieldConfig.Defaults.Custom.(validator); ok {
			for _, e := range buildErrors(v.Validate()) {
				c.report("schema (Validate): %s.fieldConfig.defaults.custom: %s", path, e)
			}
		}
	}
	b := c.grid(path, p.GridPos)
	in, dsOK := c.datasource(path, p.Datasource)

	var rawPanel struct {
		Targets []json.RawMessage `json:"targets"`
	}
	if err := json.Unmarshal(raw, &rawPanel); err != nil {
		c.report("%s.targets: %v", path, err)
		return b
	}
	if len(rawPanel.Targets) == 0 {
		c.report("%s: no targets; the panel would show no data", path)
	}
	refIDs := map[string]bool{}
	for j, rt := range rawPanel.Targets {
		tp := fmt.Sprintf("%s.targets[%d]", path, j)
		c.queries++
		var t struct {
			Datasource *common.DataSourceRef `json:"datasource"`
			Expr       *string               `json:"expr"`
			RefID      *string               `json:"refId"`
		}
		if err := json.Unmarshal(rt, &t); err != nil {
			continue // the schema decode reported it
		}
		switch {
		case t.Datasource != nil && sameRef(t.Datasource, p.Datasource):
			// The panel's datasource, checked with the panel.
		case t.Datasource != nil:
			if tin, ok := c.datasource(tp, t.Datasource); ok && dsOK && tin.Name != in.Name {
				c.report("%s: uses input %s, its panel uses %s", tp, tin.Name, in.Name)
			}
		case dsOK:
			// Without its own datasource a target is not schema-checked by the SDK's
			// dashboard decode (it cannot tell the query type); check it as the panel's.
			q, err := cog.StrictUnmarshalDataquery(rt, in.PluginID)
			for _, e := range buildErrors(err) {
				c.report("schema: %s: %s", tp, e)
			}
			if _, unknown := q.(variants.UnknownDataquery); err == nil && unknown {
				c.report("%s: the SDK has no query schema for datasource type %q", tp, in.PluginID)
			}
		}
		if t.Expr == nil || strings.TrimSpace(*t.Expr) == "" {
			c.report("%s: no expr", tp)
		} else {
			c.variableRefs(tp+".expr", *t.Expr)
		}
		switch {
		case t.RefID == nil || *t.RefID == "":
			c.report("%s: no refId", tp)
		case refIDs[*t.RefID]:
			c.report("%s: refId %q used twice in one panel", tp, *t.RefID)
		default:
			refIDs[*t.RefID] = true
		}
	}
	return b
}

// variableReference matches Grafana's variable syntaxes: $name, ${name}, ${name:format},
// [[name]] and [[name:format]].
var variableReference = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[^}]*)?\}|\[\[([A-Za-z_][A-Za-z0-9_]*)(?::[^\]]*)?\]\]`)

// variableRefs reports a variable a query uses that the dashboard does not define; Grafana
// would send it to the datasource literally. Names starting with "__" are Grafana's own
// ($__rate_interval, $__range, ...).
func (c *checker) variableRefs(path, s string) {
	for _, m := range variableReference.FindAllStringSubmatch(s, -1) {
		name := m[1] + m[2] + m[3]
		if strings.HasPrefix(name, "__") || c.variables[name] {
			continue
		}
		c.report("%s: $%s is not a dashboard variable", path, name)
	}
}

// unresolved reports `${...}` left in any string after the import that names neither a
// dashboard variable nor a Grafana built-in: an `__inputs` reference whose input is not
// declared, which Grafana's import leaves in place. Datasources and queries are left to
// the datasource and variable checks, which say more.
func (c *checker) unresolved(path string, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "datasource" || k == "expr" || k == "query" {
				continue
			}
			c.unresolved(joinPath(path, k), x[k])
		}
	case []any:
		for i, item := range x {
			c.unresolved(fmt.Sprintf("%s[%d]", path, i), item)
		}
	case string:
		for _, ref := range inputReference.FindAllString(x, -1) {
			name := strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}")
			if i := strings.IndexByte(name, ':'); i >= 0 {
				name = name[:i]
			}
			if strings.HasPrefix(name, "__") || c.variables[name] {
				continue
			}
			c.report("%s: %s is neither an __inputs entry nor a dashboard variable", path, ref)
		}
	}
}

func sameRef(a, b *common.DataSourceRef) bool {
	return a != nil && b != nil && deref(a.Type) == deref(b.Type) && deref(a.Uid) == deref(b.Uid)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
