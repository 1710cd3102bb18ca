package tokens

import (
	"math/big"
	"strconv"
)

// applyMargin returns ceil(raw × margin), computed exactly on the margin as
// written in decimal. Float multiplication would turn 70 × 1.3 into
// 91.00000000000001 and the ceiling into 92; the shortest decimal form of
// the float (the "1.3" of the configuration) does not.
func applyMargin(raw int64, margin float64) int64 {
	if margin == 1.0 || raw == 0 {
		return raw
	}
	m, ok := new(big.Rat).SetString(strconv.FormatFloat(margin, 'g', -1, 64))
	if !ok { // cannot happen for a finite margin; be conservative anyway
		m = new(big.Rat).SetFloat64(margin)
	}
	p := m.Mul(m, new(big.Rat).SetInt64(raw))
	q, r := new(big.Int).QuoRem(p.Num(), p.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}
