package datasets

import (
	"errors"
	"fmt"
)

// checkFooter walks a Parquet footer (a FileMetaData in Thrift's compact
// protocol) without decoding it, and fails unless parquet-go can decode it
// within maxDecoded bytes of memory.
//
// Why: parquet-go allocates every list at the length its header claims,
// before reading an element, so a 21-byte footer claiming 2^31 schema
// elements makes it allocate 200 GB and the process die (a fatal error, not
// a panic). Files under /session/data are written by sandboxed code. Every
// list element takes at least one byte on the wire, so a list longer than
// the bytes left is malformed; and each element is charged what decoding it
// can cost, per the Go types it becomes, so the sum bounds the memory.
func checkFooter(b []byte) error {
	w := footerWalker{b: b}
	if err := w.structure(inFileMetaData, 0); err != nil {
		return fmt.Errorf("%w: malformed Parquet footer: %w", ErrFormat, err)
	}
	return nil
}

// maxDecoded is the memory a footer may cost to decode, in bytes: about
// 128 000 column chunks, e.g. 1000 columns in 128 row groups.
const maxDecoded = 128 << 20

// maxThriftDepth bounds nesting; FileMetaData is at most about 8 deep.
const maxThriftDepth = 32

// Where a struct being walked sits in FileMetaData, which decides what its
// list fields' elements cost.
const (
	inFileMetaData = iota
	inRowGroup
	inOther
)

// Costs charged per list element, in bytes: a decoded format struct plus
// what parquet-go builds for it when opening the file (a FileColumnChunk per
// column chunk, a Column per schema element), rounded up.
const (
	costColumnChunk = 1 << 10 // format.ColumnChunk is 560 bytes
	costBig         = 512     // format.SchemaElement, format.RowGroup
	costStruct      = 128     // any other struct (the largest is 32 bytes)
	costScalar      = 32      // strings, integers, bools
)

// Thrift compact protocol types.
const (
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
	tUUID   = 13
)

var errShort = errors.New("ends early")

type footerWalker struct {
	b    []byte // what is left
	cost int64
}

func (w *footerWalker) byte() (byte, error) {
	if len(w.b) == 0 {
		return 0, errShort
	}
	c := w.b[0]
	w.b = w.b[1:]
	return c, nil
}

func (w *footerWalker) skip(n uint64) error {
	if n > uint64(len(w.b)) {
		return errShort
	}
	w.b = w.b[n:]
	return nil
}

func (w *footerWalker) uvarint() (uint64, error) {
	var x uint64
	for shift := 0; shift < 64; shift += 7 {
		c, err := w.byte()
		if err != nil {
			return 0, err
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x, nil
		}
	}
	return 0, errors.New("varint too long")
}

func (w *footerWalker) charge(n, each uint64) error {
	w.cost += int64(n * each) // n is at most len(footer), so no overflow
	if w.cost > maxDecoded {
		return fmt.Errorf("would take over %s to decode", formatBytes(maxDecoded))
	}
	return nil
}

// structure walks the fields of a struct up to its stop byte.
func (w *footerWalker) structure(where, depth int) error {
	if depth > maxThriftDepth {
		return errors.New("nested too deep")
	}
	var id int64
	for {
		h, err := w.byte()
		if err != nil || h == 0 { // 0 is the stop field
			return err
		}
		if delta := h >> 4; delta != 0 {
			id += int64(delta)
		} else {
			z, err := w.uvarint()
			if err != nil {
				return err
			}
			id = int64(z>>1) ^ -int64(z&1) // zigzag
		}
		switch typ := h & 0x0f; typ {
		case tTrue, tFalse: // the value is in the type
		case tList, tSet:
			if err := w.list(where, id, depth); err != nil {
				return err
			}
		default:
			if err := w.value(typ, depth); err != nil {
				return err
			}
		}
	}
}

// list walks a list or set that is field id of a struct at where.
func (w *footerWalker) list(where int, id int64, depth int) error {
	h, err := w.byte()
	if err != nil {
		return err
	}
	n, typ := uint64(h>>4), h&0x0f
	if n == 15 {
		if n, err = w.uvarint(); err != nil {
			return err
		}
	}
	if n > uint64(len(w.b)) {
		return fmt.Errorf("list of %d elements in %d bytes", n, len(w.b))
	}
	each, inner := uint64(costScalar), inOther
	switch {
	case where == inFileMetaData && id == 4: // row_groups
		each, inner = costBig, inRowGroup
	case where == inFileMetaData && id == 2: // schema
		each = costBig
	case where == inRowGroup && id == 1: // columns
		each = costColumnChunk
	case typ == tStruct:
		each = costStruct
	}
	if err := w.charge(n, each); err != nil {
		return err
	}
	for range n {
		var err error
		switch typ {
		case tTrue, tFalse: // one byte each inside lists
			_, err = w.byte()
		case tStruct:
			err = w.structure(inner, depth+1)
		default:
			err = w.value(typ, depth+1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// value walks one value of type typ that is not a struct field's bool.
func (w *footerWalker) value(typ byte, depth int) error {
	if depth > maxThriftDepth {
		return errors.New("nested too deep")
	}
	switch typ {
	case tTrue, tFalse, tByte:
		return w.skip(1)
	case tI16, tI32, tI64:
		_, err := w.uvarint()
		return err
	case tDouble:
		return w.skip(8)
	case tUUID:
		return w.skip(16)
	case tBinary:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		return w.skip(n)
	case tList, tSet:
		return w.list(inOther, 0, depth)
	case tMap:
		n, err := w.uvarint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		if n > uint64(len(w.b))/2 {
			return fmt.Errorf("map of %d entries in %d bytes", n, len(w.b))
		}
		if err := w.charge(n, 2*costScalar); err != nil {
			return err
		}
		for range n {
			if err := w.value(kv>>4, depth+1); err != nil {
				return err
			}
			if err := w.value(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tStruct:
		return w.structure(inOther, depth+1)
	}
	return fmt.Errorf("unknown thrift type %d", typ)
}
