package main

import (
	"database/sql"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// release is the version of this source tree, the one CHANGELOG.md names last; a build
// from a tagged module (go install …@v0.1.0) reports the module's version instead.
// buildDate is set by the release script (contrib/release.sh, -ldflags "-X
// main.buildDate=…"): a plain go build records when its commit was made, not when it was
// built.
var release, buildDate = "0.1.0", ""

// versionCmd prints what --version prints: people type "retrylens version" as often.
func (e *env) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print retrylens's version, commit, build date and DuckDB version",
		Long: "Print the version, the commit it was built from (with +changes when the tree had " +
			"uncommitted changes), when it was built (a release) or committed (a build from a clone), " +
			"the DuckDB library it links, and the Go toolchain and platform: what a bug report needs.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(e.stdout, "retrylens %s\n", version(duckdbVersion()))
			return err
		},
	}
}

// version is this build's version, commit and dates from the build info, the DuckDB
// library's version duckdb, and the toolchain.
func version(duckdb string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return release + " (no build information)"
	}
	v := release
	if m := bi.Main.Version; m != "" && m != "(devel)" && !strings.HasPrefix(m, "v0.0.0-") {
		v = strings.TrimPrefix(m, "v") // a tagged module
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var parts []string
	if rev := settings["vcs.revision"]; rev != "" {
		c := "commit " + rev[:min(12, len(rev))]
		if settings["vcs.modified"] == "true" {
			c += "+changes"
		}
		parts = append(parts, c)
	} else {
		parts = append(parts, "commit unknown: built with -buildvcs=false")
	}
	switch {
	case buildDate != "":
		parts = append(parts, "built "+buildDate)
	case settings["vcs.time"] != "":
		parts = append(parts, "committed "+settings["vcs.time"])
	}
	v += " (" + strings.Join(parts, ", ") + ")"
	v += ", DuckDB " + duckdb
	for _, d := range bi.Deps {
		if d.Path == "github.com/duckdb/duckdb-go/v2" {
			v += " (duckdb-go " + d.Version + ")"
		}
	}
	return v + ", " + bi.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// duckdbVersion asks the linked DuckDB library its version, from an in-memory database.
func duckdbVersion() string {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer db.Close()
	var v string
	if err := db.QueryRow("SELECT library_version FROM pragma_version()").Scan(&v); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return v
}
