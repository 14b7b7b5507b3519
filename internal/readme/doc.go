// Package readme holds no code: its tests check that the README's examples
// work as written, so a newcomer who copies one is not the first to find it
// broken. Go blocks are type-checked against this tree (a whole program is
// built; a snippet is built inside a function that declares the names the
// README says snippets leave out), the native API's curl examples are sent
// to a real handler over a Manager on the in-memory driver, and Python
// blocks are parsed and checked for names used but never imported or
// defined (when a python3 is on the PATH).
package readme
