package teamdir

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseVelocity reads what a velocity file (worker-<n>.velocity, or the
// file of pg-loop --velocity-file) holds: one number of steps per second,
// 0 for paused. Empty is "not set".
func ParseVelocity(b []byte) (v float64, set bool, err error) {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, false, nil
	}
	v, err = strconv.ParseFloat(s, 64)
	if err != nil || CheckVelocity(v) != nil {
		if len(s) > 20 {
			s = s[:20] + "…"
		}
		return 0, false, &VelocityError{Text: s}
	}
	return v, true, nil
}

// VelocityError is a velocity file that does not hold a velocity.
type VelocityError struct{ Text string }

func (e *VelocityError) Error() string { return fmt.Sprintf("expected a number ≥ 0, got %q", e.Text) }

// CheckVelocity refuses a velocity that is negative, NaN or infinite.
func CheckVelocity(v float64) error {
	if !(v >= 0) || math.IsInf(v, 1) {
		return fmt.Errorf("velocity %v is not a non-negative number", v)
	}
	return nil
}

// FormatVelocity writes a velocity as its file holds it.
func FormatVelocity(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64) + "\n"
}
