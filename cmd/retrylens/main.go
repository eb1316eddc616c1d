package main
import (
 _ "github.com/duckdb/duckdb-go/v2"
 _ "github.com/spf13/cobra"
 _ "github.com/olekukonko/tablewriter"
 _ "github.com/google/go-cmp/cmp"
)
func main(){}
