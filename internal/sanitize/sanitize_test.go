package sanitize

import "testing"

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain café", "plain café"},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"bell\x07 tab\t nl\n", `bell\x07 tab\x09 nl\x0a`},
		{"rtl\u202eevil", `rtl\u{202e}evil`},
		{"del\x7f", `del\x7f`},
	}
	for _, tt := range tests {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
