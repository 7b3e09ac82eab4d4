//! The "ids only" tokenizer of a model trained on token ids that came without a tokenizer
//! (the user's own `train.bin`): its text form is the ids in decimal, each after one space
//! (` 17 4 250`), so pieces decoded one after another concatenate to the whole, and a prompt
//! is typed as ids (`"17 4 250"`).

use super::invalid;
use crate::Result;

/// Token ids `0..vocab_size` with no text behind them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdsTokenizer {
    vocab_size: usize,
}

impl IdsTokenizer {
    /// A vocabulary of `vocab_size` ids (at least 1).
    pub fn new(vocab_size: usize) -> Result<Self> {
        if vocab_size == 0 {
            return Err(invalid("an ids-only vocabulary needs at least one token"));
        }
        Ok(IdsTokenizer { vocab_size })
    }

    /// Number of ids.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The ids written in `text` (decimal, separated by white space); each must be below the
    /// vocabulary size.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        text.split_whitespace()
            .map(|w| match w.parse::<u32>() {
                Ok(id) if (id as usize) < self.vocab_size => Ok(id),
                _ => Err(invalid(format!(
                    "{w:?} is not a token id below {}: this model was trained on token ids \
                     without a tokenizer, so its text is ids in decimal separated by spaces",
                    self.vocab_size
                ))),
            })
            .collect()
    }

    /// The ids in decimal, each after one space.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let mut out = String::with_capacity(ids.len() * 6);
        for &id in ids {
            if id as usize >= self.vocab_size {
                return Err(invalid(format!(
                    "token id {id} is outside the vocabulary of {}",
                    self.vocab_size
                )));
            }
            out.push(' ');
            out.push_str(&id.to_string());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_concatenate() {
        let t = IdsTokenizer::new(300).unwrap();
        assert_eq!(t.encode(" 17 4\n250 ").unwrap(), vec![17, 4, 250]);
        let whole = t.decode(&[17, 4, 250]).unwrap();
        assert_eq!(whole, " 17 4 250");
        assert_eq!(
            t.decode(&[17]).unwrap() + &t.decode(&[4, 250]).unwrap(),
            whole
        );
        assert_eq!(t.encode(&whole).unwrap(), vec![17, 4, 250]);
        assert!(t.encode("300").is_err() && t.encode("x").is_err() && t.decode(&[300]).is_err());
        assert!(IdsTokenizer::new(0).is_err());
    }
}
