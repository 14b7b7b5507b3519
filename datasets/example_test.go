package datasets_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/datasets"
	"github.com/parquet-go/parquet-go"
)

func ExampleSafeName() {
	for _, id := range []string{"sales.parquet", "../../etc/passwd", "reports/2024 Q1.CSV", ".."} {
		name, err := datasets.SafeName(id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-22q -> %s\n", id, name)
	}
	_, err := datasets.SafeName("")
	fmt.Println(err)
	// Output:
	// "sales.parquet"        -> sales.parquet
	// "../../etc/passwd"     -> etc_passwd-3754d6cb3a
	// "reports/2024 Q1.CSV"  -> reports_2024_Q1-d14c395912.csv
	// ".."                   -> dataset-5ec1f7e700
	// invalid dataset id: empty
}

func ExampleDescribe() {
	dir, err := os.MkdirTemp("", "datasets-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	type sale struct {
		ID       int64    `parquet:"id"`
		Customer *string  `parquet:"customer,optional"`
		Tags     []string `parquet:"tags,list"`
		Amount   float64  `parquet:"amount"`
	}
	rows := make([]sale, 1200)
	for i := range rows {
		rows[i] = sale{ID: int64(i), Tags: []string{"retail"}, Amount: float64(i) / 4}
	}
	path := filepath.Join(dir, "sales.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(500)); err != nil {
		log.Fatal(err)
	}

	info, err := datasets.Describe(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Parquet.Rows, info.Parquet.RowGroups, len(info.Parquet.Columns))
	for _, c := range info.Parquet.Columns {
		fmt.Printf("%s: %s nullable=%v repeated=%v\n", c.Path, c.Type, c.Nullable, c.Repeated)
	}
	info.Size = 20 << 10 // the exact size varies with the parquet-go version
	fmt.Println(info.Summary())
	// Output:
	// 1200 3 4
	// id: int64 nullable=false repeated=false
	// customer: string nullable=true repeated=false
	// tags: list<string> nullable=false repeated=true
	// amount: double nullable=false repeated=false
	// sales.parquet: 20.0 KiB, 1200 rows, 3 row groups; columns: id int64, customer string (nullable), tags list<string>, amount double
}
