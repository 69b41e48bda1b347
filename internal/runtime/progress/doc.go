// Package progress tracks what a wait is still waiting for and says so
// periodically: the gate runner logs a "gate waiting" line per gate, and
// `vigil wait` prints a "vigil: waiting ..." line per object or type, both
// from one Reporter.
//
// A Reporter holds items, one per thing waited for, each with what it last
// saw. Every interval it hands a Line per item still pending to the function
// it was made with, which formats it for its audience; an item that is done
// drops out of the lines but keeps what it last saw, for the message of a
// timeout.
package progress
