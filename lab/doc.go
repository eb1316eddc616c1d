// Package lab runs real servers on loopback for end-to-end tests: nginx from the
// system's packages in front of an in-process upstream, and a retrying client that keeps
// its own record of every attempt it made. That record is the ground truth retrylens's
// numbers are checked against.
//
// Everything binds to 127.0.0.1 and every loop is bounded.
package lab
