package datasets

import (
	"errors"
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// Column describes one column of a Parquet schema in the terms a pandas or
// pyarrow user thinks in, not the file's physical layout: a LIST group is
// one "list<...>" column, a MAP group one "map<k, v>" column.
type Column struct {
	// Name is the field name.
	Name string
	// Path is the dotted path from the top level, e.g. "address.city"; the
	// fields of a list's struct elements are under the list's path
	// ("items.price"), without the file's wrapper levels.
	Path string
	// Type is the whole type: a leaf's logical type in Arrow's words
	// ("int64", "string", "timestamp[us, UTC]", "decimal(10,2)"), or
	// "list<T>", "map<K, V>", "struct<name T, ...>" with nested fields
	// marked "(nullable)".
	Type string
	// Nullable reports whether the column may be null (optional).
	Nullable bool
	// Repeated reports whether each row holds a list of values: a repeated
	// field or a LIST group.
	Repeated bool
	// Children are the fields of a struct column, or of the struct elements
	// of a list column; nil otherwise.
	Children []Column
}

// maxSchemaDepth bounds nesting: footers come from untrusted files.
const maxSchemaDepth = 64

// schemaNode is an element of a footer's flattened schema with its children.
type schemaNode struct {
	el   *format.SchemaElement
	kids []*schemaNode
}

func (n *schemaNode) leaf() bool { return len(n.kids) == 0 }

func (n *schemaNode) rep() format.FieldRepetitionType {
	if n.el.RepetitionType.Valid {
		return n.el.RepetitionType.V
	}
	return format.Required
}

// columnsOf returns the top-level columns of a footer's schema, which
// lists the elements depth first, each group followed by its NumChildren
// children.
func columnsOf(schema []format.SchemaElement) ([]Column, error) {
	i := 0
	var build func(depth int) (*schemaNode, error)
	build = func(depth int) (*schemaNode, error) {
		if i >= len(schema) {
			return nil, errors.New("schema ends inside a group")
		}
		if depth > maxSchemaDepth {
			return nil, fmt.Errorf("schema nested deeper than %d", maxSchemaDepth)
		}
		n := &schemaNode{el: &schema[i]}
		i++
		if k := n.el.NumChildren; k.Valid && k.V > 0 {
			if int(k.V) > len(schema)-i {
				return nil, fmt.Errorf("group %q claims %d children", n.el.Name, k.V)
			}
			n.kids = make([]*schemaNode, 0, k.V)
			for range k.V {
				kid, err := build(depth + 1)
				if err != nil {
					return nil, err
				}
				n.kids = append(n.kids, kid)
			}
		}
		return n, nil
	}
	if len(schema) == 0 {
		return nil, errors.New("schema has no root")
	}
	root, err := build(0)
	if err != nil {
		return nil, err
	}
	cols := make([]Column, 0, len(root.kids))
	for _, k := range root.kids {
		cols = append(cols, k.column(k.el.Name))
	}
	return cols, nil
}

// column describes n at path, its repetition included.
func (n *schemaNode) column(path string) Column {
	c := n.value(path)
	if n.rep() == format.Repeated {
		c.Type = "list<" + c.Type + ">"
		c.Repeated = true
	}
	return c
}

// value describes n at path as if it were not repeated, for the element
// of a list whose repeated level is n itself.
func (n *schemaNode) value(path string) Column {
	c := Column{Name: n.el.Name, Path: path, Nullable: n.rep() == format.Optional}
	switch {
	case n.leaf():
		c.Type = leafType(n.el)
	case isList(n.el) && len(n.kids) == 1:
		elem := n.listElement()
		var ec Column
		if elem == n.kids[0] {
			ec = elem.value(path)
		} else {
			ec = elem.column(path)
		}
		c.Type = "list<" + ec.Type + ">"
		c.Repeated = true
		c.Children = ec.Children
	case isMap(n.el) && len(n.kids) == 1 && len(n.kids[0].kids) == 2:
		kv := n.kids[0]
		k, v := kv.kids[0].column(path+".key"), kv.kids[1].column(path+".value")
		c.Type = "map<" + k.Type + ", " + v.Type + ">"
	default:
		c.Children = make([]Column, 0, len(n.kids))
		fields := make([]string, 0, len(n.kids))
		for _, k := range n.kids {
			kc := k.column(path + "." + k.el.Name)
			c.Children = append(c.Children, kc)
			fields = append(fields, kc.describe())
		}
		c.Type = "struct<" + strings.Join(fields, ", ") + ">"
	}
	return c
}

// listElement returns the node holding a LIST group's elements, following
// the backward-compatibility rules of the Parquet format's LogicalTypes.md:
// the repeated child itself when it is a leaf, a group of several fields,
// or named "array" or "<list>_tuple"; else that child's only child.
func (n *schemaNode) listElement() *schemaNode {
	rep := n.kids[0]
	if rep.leaf() || len(rep.kids) != 1 || rep.el.Name == "array" || rep.el.Name == n.el.Name+"_tuple" {
		return rep
	}
	return rep.kids[0]
}

// describe returns "name type", with " (nullable)" when it is.
func (c Column) describe() string {
	s := quoteName(c.Name) + " " + c.Type
	if c.Nullable {
		s += " (nullable)"
	}
	return s
}

func isList(el *format.SchemaElement) bool {
	if _, ok := el.LogicalType.Value.(*format.ListType); ok {
		return true
	}
	return el.ConvertedType.Valid && el.ConvertedType.V == deprecated.List
}

func isMap(el *format.SchemaElement) bool {
	if _, ok := el.LogicalType.Value.(*format.MapType); ok {
		return true
	}
	return el.ConvertedType.Valid && (el.ConvertedType.V == deprecated.Map || el.ConvertedType.V == deprecated.MapKeyValue)
}

// leafType names a leaf's type as Arrow does: the logical type when there
// is one, else the legacy converted type, else the physical type.
func leafType(el *format.SchemaElement) string {
	switch t := el.LogicalType.Value.(type) {
	case *format.StringType:
		return "string"
	case *format.EnumType:
		return "enum"
	case *format.JsonType:
		return "json"
	case *format.BsonType:
		return "bson"
	case *format.UUIDType:
		return "uuid"
	case *format.DateType:
		return "date"
	case *format.TimeType:
		return "time[" + unit(t.Unit) + "]"
	case *format.TimestampType:
		if t.IsAdjustedToUTC {
			return "timestamp[" + unit(t.Unit) + ", UTC]"
		}
		return "timestamp[" + unit(t.Unit) + "]"
	case *format.DecimalType:
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale)
	case *format.IntType:
		if t.IsSigned {
			return fmt.Sprintf("int%d", t.BitWidth)
		}
		return fmt.Sprintf("uint%d", t.BitWidth)
	case *format.Float16Type:
		return "float16"
	case *format.NullType:
		return "null"
	case *format.VariantType:
		return "variant"
	case *format.GeometryType:
		return "geometry"
	case *format.GeographyType:
		return "geography"
	}
	if el.ConvertedType.Valid {
		if s, ok := convertedTypes[el.ConvertedType.V]; ok {
			return s
		}
		if el.ConvertedType.V == deprecated.Decimal {
			return fmt.Sprintf("decimal(%d,%d)", el.Precision.V, el.Scale.V)
		}
	}
	if !el.Type.Valid {
		return "unknown"
	}
	switch el.Type.V {
	case format.Boolean:
		return "bool"
	case format.Int32:
		return "int32"
	case format.Int64:
		return "int64"
	case format.Int96:
		return "int96" // legacy timestamps; pyarrow reads them as timestamp[ns]
	case format.Float:
		return "float"
	case format.Double:
		return "double"
	case format.ByteArray:
		return "binary"
	case format.FixedLenByteArray:
		return fmt.Sprintf("fixed_size_binary[%d]", el.TypeLength.V)
	}
	return "unknown"
}

// convertedTypes names the legacy annotations old writers set alone.
var convertedTypes = map[deprecated.ConvertedType]string{
	deprecated.UTF8:            "string",
	deprecated.Enum:            "enum",
	deprecated.Json:            "json",
	deprecated.Bson:            "bson",
	deprecated.Date:            "date",
	deprecated.TimeMillis:      "time[ms]",
	deprecated.TimeMicros:      "time[us]",
	deprecated.TimestampMillis: "timestamp[ms, UTC]",
	deprecated.TimestampMicros: "timestamp[us, UTC]",
	deprecated.Uint8:           "uint8",
	deprecated.Uint16:          "uint16",
	deprecated.Uint32:          "uint32",
	deprecated.Uint64:          "uint64",
	deprecated.Int8:            "int8",
	deprecated.Int16:           "int16",
	deprecated.Int32:           "int32",
	deprecated.Int64:           "int64",
	deprecated.Interval:        "interval",
}

func unit(u format.TimeUnit) string {
	switch u.Value.(type) {
	case *format.MilliSeconds:
		return "ms"
	case *format.MicroSeconds:
		return "us"
	case *format.NanoSeconds:
		return "ns"
	}
	return "?"
}
