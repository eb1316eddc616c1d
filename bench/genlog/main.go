// Command genlog writes a large synthetic access log, deterministic for a seed, and the
// truth of what it wrote (lab.Generate), for benchmarks and sample logs.
//
//	go run ./bench/genlog --lines 10000000 --seed 1 --format retry --truth truth.json > access.log
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/retrylens/retrylens/lab"
	"github.com/retrylens/retrylens/parse"
)

func main() {
	lines := flag.Int("lines", 1_000_000, "lines to write")
	flag.IntVar(lines, "n", 1_000_000, "shorthand for --lines")
	seed := flag.Uint64("seed", 1, "random seed")
	format := flag.String("format", "retry", "preset: retry, combined, nginx-json or caddy")
	truth := flag.String("truth", "", "write the truth of the log to this JSON file")
	flag.Parse()
	if err := run(*lines, *seed, *format, *truth); err != nil {
		fmt.Fprintln(os.Stderr, "genlog:", err)
		os.Exit(1)
	}
}

func run(lines int, seed uint64, format, truthPath string) error {
	f, err := parse.Preset(format)
	if err != nil {
		return err
	}
	t, err := lab.Generate(os.Stdout, f, lines, seed)
	if err != nil {
		return err
	}
	if truthPath == "" {
		return nil
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(truthPath, append(b, '\n'), 0o644)
}
