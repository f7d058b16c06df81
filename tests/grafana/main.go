// Command dashcheck validates Grafana dashboard files the way Grafana's import would
// receive them, against Grafana's own dashboard schema (the Grafana Foundation SDK's
// generated types), plus the checks in Check. It prints one line per problem and exits 1
// if any file has one, 2 on bad usage.
//
//	go run . FILE...
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

const sdkModule = "github.com/grafana/grafana-foundation-sdk/go"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run checks every file named in args and returns the exit status: 0 when all pass,
// 1 when any has a problem or cannot be read, 2 when no file is named.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: dashcheck DASHBOARD.json...")
		return 2
	}
	status := 0
	for _, path := range args {
		raw, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			status = 1
			continue
		}
		sum, problems := Check(raw)
		if len(problems) > 0 {
			status = 1
			fmt.Fprintf(stderr, "%s: FAILED, %d problem(s):\n", path, len(problems))
			for _, p := range problems {
				fmt.Fprintf(stderr, "  %s\n", p)
			}
			continue
		}
		var inputs []string
		for _, in := range sum.Inputs {
			inputs = append(inputs, fmt.Sprintf("%s (%s %s)", in.Name, in.Type, in.PluginID))
		}
		fmt.Fprintf(stdout, "%s: ok: %q uid %s, schemaVersion %d; import of inputs [%s] applied; "+
			"strict decode with %s %s: %d rows, %d panels, %d queries, %d variables\n",
			path, sum.Title, sum.UID, sum.SchemaVersion, strings.Join(inputs, ", "),
			sdkModule, sdkVersion(), sum.Rows, sum.Panels, sum.Queries, sum.Variables)
	}
	return status
}

// sdkVersion is the SDK version this binary was built with, from its build info.
func sdkVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == sdkModule {
				return dep.Version
			}
		}
	}
	return "(unknown version)"
}
