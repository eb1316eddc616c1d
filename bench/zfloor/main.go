package main

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

func cpu() float64 {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func main() {
	db, err := sql.Open("duckdb", "")
	must(err)
	db.SetMaxOpenConns(1)
	_, err = db.Exec(`ATTACH '` + os.Args[1] + `' AS src (READ_ONLY)`)
	must(err)
	_, err = db.Exec(`CREATE TABLE m AS SELECT * FROM src.requests`)
	must(err)
	small := strings.Split("method,protocol,referer,user_agent,host,upstream_addr,upstream_status,upstream_response_time,attempt_source,retry_reason,retry_after", ",")
	var ex []string
	for _, c := range small {
		ex = append(ex, "(hash("+c+") % 1000)::UINTEGER AS "+c)
	}
	_, err = db.Exec(`CREATE TABLE mi AS SELECT * REPLACE (` + strings.Join(ex, ",") + `) FROM m`)
	must(err)
	rows, err := db.Query(`SELECT column_name FROM (DESCRIBE m)`)
	must(err)
	var all []string
	for rows.Next() {
		var c string
		rows.Scan(&c)
		all = append(all, c)
	}
	rows.Close()
	cols := strings.Join(all, ",")
	variants := map[string]string{"auto": "SET force_compression='auto'; SET disabled_compression_methods=''"}
	order := []string{"auto"}
	for _, v := range os.Args[2:] {
		variants[v] = v
		order = append(order, v)
	}
	must2 := func(q string) { _, err := db.Exec(q); must(err) }
	must2(`SET memory_limit='128MB'`)
	must2(`SET preserve_insertion_order=false`)
	for round := 0; round < 3; round++ {
		for i, name := range order {
			path := fmt.Sprintf("/tmp/zf%d.duckdb", i)
			os.Remove(path)
			os.Remove(path + ".wal")
			must2(`ATTACH '` + path + `' AS dst`)
			must2(variants["auto"])
			if !strings.HasPrefix(name, "-") && name != "ids" {
				must2(variants[name])
			}
			t0, c0 := time.Now(), cpu()
			sel := cols
			setting := variants[name]
			if strings.HasPrefix(name, "-") {
				setting = ""
				var keep []string
				for _, c := range all {
					if !strings.Contains(","+name[1:]+",", ","+c+",") {
						keep = append(keep, c)
					}
				}
				sel = strings.Join(keep, ",")
			}
			_ = setting
			from := "m"
			if name == "ids" {
				from = "mi"
			}
			must2(`CREATE TABLE dst.t AS SELECT ` + sel + ` FROM ` + from)
			must2(`CHECKPOINT dst`)
			st, _ := os.Stat(path)
			fmt.Printf("%d %-60s %.3fs %.3f core-s %d MB\n", round, name, time.Since(t0).Seconds(), cpu()-c0, st.Size()>>20)
			must2(`DETACH dst`)
		}
	}
}
