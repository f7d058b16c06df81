package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// DuplicateKeys lists every object key that appears twice in the same object, with its
// path. Grafana (and every JSON decoder it uses) silently keeps the last of them, so a
// duplicate in a hand-edited dashboard loses a setting without any error; the schema
// decode cannot see it because it works on the already-merged object.
func DuplicateKeys(raw []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var dups []string
	if err := walkValue(dec, "", &dups); err != nil {
		return nil, err
	}
	return dups, nil
}

func walkValue(dec *json.Decoder, path string, dups *[]string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch delim {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			keyTok, err := dec.Token()
			if err != nil {
				return err
			}
			key, ok := keyTok.(string)
			if !ok {
				return fmt.Errorf("%s: object key is not a string", path)
			}
			child := key
			if path != "" {
				child = path + "." + key
			}
			if seen[key] {
				*dups = append(*dups, child)
			}
			seen[key] = true
			if err := walkValue(dec, child, dups); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walkValue(dec, path+"["+strconv.Itoa(i)+"]", dups); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
