package ingest

/*
#include <stdint.h>

// The few functions of DuckDB's C API (duckdb.h) the filler calls, declared here: the
// library itself is linked in through duckdb-go's bindings.
typedef uint64_t idx_t;
typedef struct _duckdb_data_chunk { void *internal_ptr; } *duckdb_data_chunk;
typedef struct _duckdb_vector { void *internal_ptr; } *duckdb_vector;
idx_t duckdb_data_chunk_get_column_count(duckdb_data_chunk chunk);
duckdb_vector duckdb_data_chunk_get_vector(duckdb_data_chunk chunk, idx_t col_idx);
void duckdb_data_chunk_set_size(duckdb_data_chunk chunk, idx_t size);
void *duckdb_vector_get_data(duckdb_vector vector);
uint64_t *duckdb_vector_get_validity(duckdb_vector vector);
void duckdb_vector_ensure_validity_writable(duckdb_vector vector);
void duckdb_unsafe_vector_assign_string_element_len(duckdb_vector vector, idx_t index, const char *str, idx_t str_len);

// retrylens_fill writes n rows of ncols columns into chunk. Column j's value of row i is
// val[j*n+i], NULL unless ok[j*n+i]: for a string column (width 0) the offset into buf
// (high 32 bits) and the length (low 32), else the number itself, width bytes of it (a
// DOUBLE's bits as they are). It returns -1, writing nothing, when the chunk does not
// have ncols columns.
static int retrylens_fill(duckdb_data_chunk chunk, idx_t ncols, const uint8_t *width, idx_t n,
                          const char *buf, const uint64_t *val, const uint8_t *ok) {
	if (duckdb_data_chunk_get_column_count(chunk) != ncols) {
		return -1;
	}
	for (idx_t j = 0; j < ncols; j++) {
		duckdb_vector v = duckdb_data_chunk_get_vector(chunk, j);
		duckdb_vector_ensure_validity_writable(v);
		uint64_t *mask = duckdb_vector_get_validity(v);
		void *data = duckdb_vector_get_data(v);
		const uint64_t *x = val + j * n;
		const uint8_t *y = ok + j * n;
		for (idx_t i = 0; i < n; i++) {
			uint64_t bit = (uint64_t)1 << (i & 63);
			if (!y[i]) {
				mask[i >> 6] &= ~bit;
				continue;
			}
			mask[i >> 6] |= bit;
			switch (width[j]) {
			case 0:
				duckdb_unsafe_vector_assign_string_element_len(v, i, buf + (x[i] >> 32), x[i] & 0xffffffffu);
				break;
			case 2:
				((int16_t *)data)[i] = (int16_t)x[i];
				break;
			case 4:
				((int32_t *)data)[i] = (int32_t)x[i];
				break;
			default:
				((uint64_t *)data)[i] = x[i];
			}
		}
	}
	duckdb_data_chunk_set_size(chunk, n);
	return 0;
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"
	"unsafe"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
)

// A batch goes into DuckDB's chunk in one cgo call: the values of every column are laid
// out first in Go (filler), then C writes them into the chunk's vectors, strings through
// DuckDB's assignment without its UTF-8 check (every string is checked here). One call per
// value, as duckdb-go's SetChunkValue makes, cost a third of a load's CPU
// (bench/README.md).

// filler is one of DuckDB's threads' scratch space for a batch: the layout retrylens_fill
// reads. Its arrays hold no Go pointers, so C may read them.
type filler struct {
	n     int
	buf   []byte   // the strings of the batch, one after the other
	val   []uint64 // column j, row i at j*n+i
	ok    []uint8  // 0: NULL
	width []uint8  // per column: 0 for a string, else the number's bytes
}

// reset makes room for a batch of n rows.
func (f *filler) reset(n int) {
	f.n = n
	size := n * len(rowColumns)
	if cap(f.val) < size {
		f.val, f.ok = make([]uint64, size), make([]uint8, size)
	}
	f.val, f.ok = f.val[:size], f.ok[:size]
	f.buf = f.buf[:0]
	f.width = rowWidths
}

// rowWidths are rowColumns' widths for retrylens_fill.
var rowWidths []uint8

func init() {
	for _, c := range rowColumns {
		rowWidths = append(rowWidths, widthOf(c.typ))
	}
}

// widthOf is the bytes of a column's value in a DuckDB vector, 0 for a string. A type
// retrylens_fill cannot write is a programming error, found when the package loads.
func widthOf(t duckdb.Type) uint8 {
	switch t {
	case duckdb.TYPE_VARCHAR:
		return 0
	case duckdb.TYPE_SMALLINT:
		return 2
	case duckdb.TYPE_INTEGER:
		return 4
	case duckdb.TYPE_BIGINT, duckdb.TYPE_DOUBLE:
		return 8
	}
	panic(fmt.Sprintf("%s: no way to fill a column of DuckDB type %d", rowsFunction, t))
}

// text sets column col of row i to s ("" is NULL).
func (f *filler) text(col, i int, s string) {
	k := col*f.n + i
	if s == "" {
		f.ok[k] = 0
		return
	}
	f.val[k] = uint64(len(f.buf))<<32 | uint64(len(s))
	f.ok[k] = 1
	f.buf = append(f.buf, s...)
}

// checkUTF8 makes every string of the batch valid UTF-8, as DuckDB's VARCHAR needs: one
// that is not (the parsers return none) is stored with its stray bytes escaped. A batch
// of ASCII alone, nearly every one, is checked eight bytes at a time.
func (f *filler) checkUTF8() {
	if isASCII(f.buf) {
		return
	}
	for col, w := range f.width {
		if w != 0 {
			continue
		}
		for k := col * f.n; k < (col+1)*f.n; k++ {
			if f.ok[k] == 0 {
				continue
			}
			off, n := f.val[k]>>32, f.val[k]&0xffffffff
			if s := string(f.buf[off : off+n]); !utf8.ValidString(s) {
				s = validUTF8(s)
				f.val[k] = uint64(len(f.buf))<<32 | uint64(len(s))
				f.buf = append(f.buf, s...)
			}
		}
	}
}

// isASCII reports whether b has no byte with the high bit set.
func isASCII(b []byte) bool {
	var or uint64
	for len(b) >= 8 {
		or |= binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	for _, c := range b {
		or |= uint64(c)
	}
	return or&0x8080808080808080 == 0
}

// number sets column col of row i to the bits of a number, NULL unless ok.
func (f *filler) number(col, i int, bits uint64, ok bool) {
	k := col*f.n + i
	f.val[k] = bits
	f.ok[k] = 0
	if ok {
		f.ok[k] = 1
	}
}

// chunkHandle checks, once, that duckdb-go's DataChunk starts with the C chunk, as write
// reads it: a later duckdb-go that moved it fails every load with this error, not a crash.
var chunkHandle = func() error {
	f, ok := reflect.TypeFor[duckdb.DataChunk]().FieldByName("chunk")
	if !ok || f.Offset != 0 || f.Type != reflect.TypeFor[mapping.DataChunk]() {
		return errors.New("this duckdb-go's DataChunk does not hold its C chunk first: " + rowsFunction + " cannot fill it")
	}
	return nil
}()

var errChunkShape = errors.New("DuckDB's chunk does not have the columns of " + rowsFunction)

// write hands the laid-out batch to DuckDB's chunk c.
func (f *filler) write(c *duckdb.DataChunk) error {
	if chunkHandle != nil {
		return chunkHandle
	}
	f.checkUTF8()
	if uint64(len(f.buf)) > math.MaxUint32 {
		return fmt.Errorf("%s: a batch of %d bytes of strings, past the 4 GiB its offsets address", rowsFunction, len(f.buf))
	}
	// duckdb-go keeps the C chunk as the first field of its DataChunk; C checks the
	// chunk's column count before it writes.
	chunk := (*mapping.DataChunk)(unsafe.Pointer(c)).Ptr
	var buf *C.char
	if len(f.buf) > 0 {
		buf = (*C.char)(unsafe.Pointer(&f.buf[0]))
	}
	var val *C.uint64_t
	var ok *C.uint8_t
	if len(f.val) > 0 {
		val, ok = (*C.uint64_t)(unsafe.Pointer(&f.val[0])), (*C.uint8_t)(unsafe.Pointer(&f.ok[0]))
	}
	rc := C.retrylens_fill(C.duckdb_data_chunk(chunk), C.idx_t(len(f.width)), (*C.uint8_t)(unsafe.Pointer(&f.width[0])),
		C.idx_t(f.n), buf, val, ok)
	if rc != 0 {
		return errChunkShape
	}
	return nil
}
