package collector

import (
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// renderGzip renders what collect sends straight into the text exposition
// format, gzipped, family by family in Descs order: a first pass finds
// the families, then one pass each formats that family's samples only,
// through a small buffer. client_golang's Gather builds a protobuf
// message per series (some 200k at 10k associations): most of a
// publish's time and of the exporter's memory, for bytes that are the same
// (TestRenderMatchesClientGolang); and holding the whole text (100 MB at
// 100k associations) before compressing it would be most of the peak RSS.
func renderGzip(p *gzipPool, about int, collect func(sink)) []byte {
	return p.gzipped(about, func(zw io.Writer) {
		seen := make([]bool, len(Descs))
		types := make([]prometheus.ValueType, len(Descs))
		collect(func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
			i := families[d].index
			seen[i], types[i] = true, t
		})
		buf := make([]byte, 0, 64<<10)
		for i := range Descs {
			if !seen[i] {
				continue
			}
			buf = appendHeader(buf, i, types[i])
			collect(func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
				f := families[d]
				if f.index != i {
					return
				}
				buf = appendSample(buf, f, v, labels)
				if len(buf) >= 64<<10 {
					zw.Write(buf)
					buf = buf[:0]
				}
			})
		}
		zw.Write(buf)
	})
}

// families indexes Descs, with each family's label names in the sorted
// order client_golang writes them.
var families = func() map[*prometheus.Desc]family {
	m := make(map[*prometheus.Desc]family, len(Descs))
	for i, d := range Descs {
		order := make([]int, len(Metrics[i].Labels))
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(a, b int) int { return strings.Compare(Metrics[i].Labels[a], Metrics[i].Labels[b]) })
		m[d] = family{index: i, order: order}
	}
	return m
}()

type family struct {
	index int
	order []int // label positions, by label name
}

// appendHeader appends family i's HELP and TYPE lines.
func appendHeader(b []byte, i int, t prometheus.ValueType) []byte {
	typ := "gauge"
	if t == prometheus.CounterValue {
		typ = "counter"
	}
	b = append(b, "# HELP "...)
	b = append(b, Metrics[i].Name...)
	b = append(b, ' ')
	b = appendEscaped(b, Metrics[i].Help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, Metrics[i].Name...)
	b = append(b, ' ')
	b = append(b, typ...)
	return append(b, '\n')
}

// appendSample appends one sample line.
func appendSample(b []byte, f family, v float64, labels []string) []byte {
	info := &Metrics[f.index]
	b = append(b, info.Name...)
	if len(labels) > 0 {
		b = append(b, '{')
		for k, j := range f.order {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, info.Labels[j]...)
			b = append(b, '=', '"')
			b = appendEscaped(b, labels[j], true)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n')
}

// appendEscaped escapes as the text format asks: backslash and newline,
// and in label values the double quote; bytes that are not UTF-8 become
// U+FFFD, as client_golang requires.
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for _, r := range s {
		switch {
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return b
}

func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
