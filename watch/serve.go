package watch

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics (Prometheus's text format, or OpenMetrics when the scraper
// asks for it) and, at /, the HTML report of the last HTMLWindow up to the last closed
// minute, as of the last batch.
func (w *Watcher) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(w, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /{$}", func(rw http.ResponseWriter, _ *http.Request) {
		w.mu.Lock()
		page := w.page
		w.asked = w.o.Now()
		w.mu.Unlock()
		rw.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
		if page == nil {
			rw.Header().Set("Content-Type", "text/html; charset=utf-8")
			rw.Header().Set("Refresh", "10")
			rw.Write([]byte("<!doctype html><title>retrylens watch</title><p>The report shows after the next batch that has closed a minute.</p>\n"))
			return
		}
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		rw.Header().Set("Refresh", "60")
		rw.Write(page)
	})
	return mux
}
