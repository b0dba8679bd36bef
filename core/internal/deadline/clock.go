package deadline

import "time"

// nowEpoch is the clock's reading when the package loaded (never inside a
// synctest bubble): Now counts from it.
var nowEpoch = time.Now()

// Now returns the current time for a deadline, as time.Now does, reading
// only the monotonic clock: on some virtual machines that costs half as
// much, and a timed request reads the clock once. Its wall reading is the
// epoch's plus the monotonic time since, so it differs from time.Now's
// only by a wall-clock step made since the process started; comparisons
// and durations between such times use the monotonic readings, as they do
// for time.Now's.
//
// Inside a testing/synctest bubble it returns time.Now, the bubble's
// clock (without a monotonic reading, which FakeClock relies on).
func Now() time.Time {
	// In a bubble, Since reads the bubble's clock, which starts in 2000:
	// before the epoch, so the difference is negative.
	if el := time.Since(nowEpoch); el >= 0 {
		return nowEpoch.Add(el)
	}
	return time.Now()
}
