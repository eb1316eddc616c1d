package parse

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// FromNginxConf reads the log_format called name from an nginx configuration file,
// following include directives (relative to the file's directory, globs allowed), and
// compiles it. The format's pieces may span lines; its escape= parameter is honoured.
func FromNginxConf(path, name string) (*Format, error) {
	var found []string
	var names, used []string
	formats := map[string][]string{}
	if err := scanConf(path, 0, func(args []string) {
		switch {
		case len(args) >= 2 && args[0] == "log_format":
			names = append(names, args[1])
			formats[args[1]] = args
		case len(args) >= 3 && args[0] == "access_log" && !slices.Contains(used, args[2]):
			used = append(used, args[2])
		}
	}); err != nil {
		return nil, err
	}
	if name == "" {
		// Without --log-format-name: the one log_format, or the one access_log uses.
		var defined []string
		for _, u := range used {
			if formats[u] != nil {
				defined = append(defined, u)
			}
		}
		switch {
		case len(names) == 1:
			name = names[0]
		case len(defined) == 1:
			name = defined[0]
		case len(names) > 1:
			return nil, fmt.Errorf("%s has %d log_formats (%s): --log-format-name names the one the log was written with", path, len(names), strings.Join(names, ", "))
		}
	}
	found = formats[name]
	if found == nil {
		if len(names) == 0 {
			return nil, fmt.Errorf("%s: no log_format directive (nginx's default is combined: --log-format combined)", path)
		}
		return nil, fmt.Errorf("%s: no log_format named %q; there are: %s", path, name, strings.Join(names, ", "))
	}
	esc := EscapeDefault
	rest := found[2:]
	if len(rest) > 0 && strings.HasPrefix(rest[0], "escape=") {
		e, err := ParseEscape(strings.TrimPrefix(rest[0], "escape="))
		if err != nil {
			return nil, fmt.Errorf("%s: log_format %s: %w", path, name, err)
		}
		esc, rest = e, rest[1:]
	}
	f, err := Compile(strings.Join(rest, ""), esc)
	if err != nil {
		return nil, fmt.Errorf("%s: log_format %s: %w", path, name, err)
	}
	f.Name = "nginx.conf:" + name
	return f, nil
}

// scanConf calls fn with the arguments of every directive of an nginx configuration,
// quotes removed, in order, descending into include files.
func scanConf(path string, depth int, fn func(args []string)) error {
	if depth > 10 {
		return fmt.Errorf("%s: includes nested more than 10 deep", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var args []string
	var tok strings.Builder
	inTok := false
	end := func() {
		if inTok {
			args = append(args, tok.String())
			tok.Reset()
			inTok = false
		}
	}
	s := string(b)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '#' && !inTok:
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '\'' || c == '"':
			// A quoted piece: nginx joins adjacent pieces of one argument only when
			// written as separate arguments, which log_format then concatenates.
			end()
			j := i + 1
			var q strings.Builder
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				q.WriteByte(s[j])
			}
			if j >= len(s) {
				return fmt.Errorf("%s: unterminated %c quote", path, c)
			}
			args = append(args, q.String())
			i = j
		case c == ';' || c == '{' || c == '}':
			end()
			if len(args) > 0 {
				if args[0] == "include" && len(args) == 2 && c == ';' {
					pattern := args[1]
					if !filepath.IsAbs(pattern) {
						pattern = filepath.Join(filepath.Dir(path), pattern)
					}
					matches, err := filepath.Glob(pattern)
					if err != nil {
						return fmt.Errorf("%s: include %s: %w", path, args[1], err)
					}
					for _, m := range matches {
						if err := scanConf(m, depth+1, fn); err != nil {
							return err
						}
					}
				} else {
					fn(args)
				}
			}
			args = nil
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			end()
		default:
			tok.WriteByte(c)
			inTok = true
		}
	}
	return nil
}
