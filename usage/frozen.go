package usage

import (
	"fmt"
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// Frozen is usage kept per id_assoc and TRES, decayed to the pass At, and
// finished jobs' uncharged usage per id_assoc: a Refresher's frozen sums,
// which only decay forward.
type Frozen struct {
	Usage     map[Key]float64
	Uncharged map[uint32]float64
	At        float64
}

// NewFrozen is empty frozen sums decayed to at.
func NewFrozen(at float64) Frozen {
	return Frozen{Usage: map[Key]float64{}, Uncharged: map[uint32]float64{}, At: at}
}

// Add adds o's sums to f's (decayed to the same moment).
func (f Frozen) Add(o Frozen) {
	for k, v := range o.Usage {
		f.Usage[k] += v
	}
	for id, v := range o.Uncharged {
		f.Uncharged[id] += v
	}
}

// AddRows adds each row's decayed contribution at in.At (Bucket).
func (f Frozen) AddRows(in *Inputs, rows []Row, p Period) {
	for _, u := range rows {
		f.Usage[Key{u.Assoc, u.TRES}] += in.Bucket(u, p)
	}
}

// Advance decays f to the pass now and adds newly, decayed to now already.
func (f *Frozen) Advance(p fairshare.Passes, now float64, newly Frozen) {
	decay := math.Pow(p.D(), now-f.At)
	for k := range f.Usage {
		f.Usage[k] *= decay
	}
	for id := range f.Uncharged {
		f.Uncharged[id] *= decay
	}
	f.Add(newly)
	f.At = now
}

// Scale is the decay from f.At to now.
func (f Frozen) Scale(p fairshare.Passes, now float64) float64 {
	return math.Pow(p.D(), now-f.At)
}

// Charged is usage kept per id_assoc, charged to the tree associations
// that carry it: per TRES and tree association, and uncharged usage per
// tree association, before subtree sums.
type Charged struct {
	TRES      map[uint32][]float64
	Uncharged []float64
	Problems  []error
}

// chargeTo adds v to TRES k.TRES of the tree association that carries
// k.Assoc (through Node), unless the TRES is not kept (AllTRES); an error
// when no association does.
func (in *Inputs) chargeTo(tres map[uint32][]float64, k Key, v float64, what string) error {
	if !KeepsTRES(k.TRES, in.AllTRES) {
		return nil
	}
	i, ok := in.Node[k.Assoc]
	if !ok {
		return fmt.Errorf("%s of id_assoc=%d: no live association to charge it to: left out", what, k.Assoc)
	}
	s := tres[k.TRES]
	if s == nil {
		s = make([]float64, len(in.Assocs))
		tres[k.TRES] = s
	}
	s[i] += v
	return nil
}

// Charge charges usage and uncharged usage kept per id_assoc to the tree,
// through Node.
func (in *Inputs) Charge(f Frozen) *Charged {
	n := len(in.Assocs)
	c := &Charged{TRES: map[uint32][]float64{TRESBilling: make([]float64, n)}, Uncharged: make([]float64, n)}
	for k, v := range f.Usage {
		if err := in.chargeTo(c.TRES, k, v, "usage"); err != nil {
			c.Problems = append(c.Problems, err)
		}
	}
	for id, v := range f.Uncharged {
		if i, ok := in.Node[id]; ok {
			c.Uncharged[i] += v
		}
	}
	return c
}
