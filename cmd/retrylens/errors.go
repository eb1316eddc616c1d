package main

import (
	"fmt"
	"strings"

	"github.com/retrylens/retrylens/ingest"
)

// The exit codes: exitCodes says what each means, for the root command's help and
// README's table (TestExitCodesDoc), so that the code and the docs cannot part.
const (
	exitOK      = 0
	exitError   = 1
	exitUsage   = 2
	exitAlert   = 3 // check: an alert at or above --fail-on fired
	exitRejects = 4 // ingest: the rejected share passed --max-reject-ratio
	exitDamaged = 5 // any command: the database file is damaged; verify: it is not what its registry says
	exitNoData  = 6 // check, budget: nothing to judge (a CI job pointed at the wrong file must not pass)
)

var exitCodes = []struct {
	code          int
	commands, say string
}{
	{exitOK, "", "success"},
	{exitError, "", "an error (an input could not be read, the database is busy, the disk is full): the message says what to do"},
	{exitUsage, "", "bad flags or arguments"},
	{exitAlert, "check", "an alert at or above --fail-on fired, or a --fail-on-finding finding is present"},
	{exitRejects, "ingest", "more lines rejected than --max-reject-ratio allows"},
	{exitDamaged, "", "the database is damaged: a block does not read back as written, or (verify) its rows are not what its registry says"},
	{exitNoData, "check, budget", "nothing to judge: no rows in the range, or none with an attempt number"},
}

// exitCodesText is the exit codes as the root command's help lists them.
func exitCodesText() string {
	var b strings.Builder
	b.WriteString("Exit codes:")
	for _, c := range exitCodes {
		fmt.Fprintf(&b, "\n  %d  ", c.code)
		if c.commands != "" {
			fmt.Fprintf(&b, "(%s) ", c.commands)
		}
		b.WriteString(c.say)
	}
	return b.String()
}

// exitCodesMarkdown is the exit codes as README's table.
func exitCodesMarkdown() string {
	var b strings.Builder
	b.WriteString("| exit | command | meaning |\n| --- | --- | --- |\n")
	for _, c := range exitCodes {
		cmd := c.commands
		if cmd == "" {
			cmd = "any"
		}
		fmt.Fprintf(&b, "| %d | %s | %s |\n", c.code, cmd, c.say)
	}
	return b.String()
}

// explain says in plain words, with the next step, what an error DuckDB or the file
// system gave means, and the exit code it takes; "" when it is none of those.
func explain(err error) (string, int) {
	switch {
	case ingest.Damaged(err):
		return "the database file is damaged: part of it does not read back as it was written (a disk, copy or filesystem fault, or a file cut short).\n" +
			"Restore it from a copy, or load the logs again into a new --db file; 'retrylens verify' reads every block of one.", exitDamaged
	case diskFull(err):
		return "the disk holding the database is full (or the file size limit was reached).\n" +
			"What was committed before is kept: free some space and run the same command again; an ingest resumes after its last committed chunk.", exitError
	}
	return "", 0
}

// diskFull reports whether err is a write that found no space: DuckDB's message for
// ENOSPC or EFBIG, which the database it invalidated after one quotes too.
func diskFull(err error) bool {
	m := err.Error() // errors.Join's holds every file's
	return strings.Contains(m, "No space left on device") || strings.Contains(m, "File too large")
}
