//! Repairs the corpus files of `benches/peers.sh` and reports the time, for the
//! side-by-side comparison with the Python and JavaScript peers.
//!
//! `repair_files doc FILE OUT` repairs one whole document; `repair_files lines FILE OUT`
//! repairs each line on its own. Prints the seconds spent repairing (not reading).

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: repair_files doc|lines FILE OUT");
        std::process::exit(2);
    }
    let input = std::fs::read_to_string(&args[2]).expect("read the corpus");
    let started = Instant::now();
    let out = match args[1].as_str() {
        "doc" => toolloop::turn::repair::repair_to_string(&input)
            .map(|(t, _)| t)
            .unwrap_or_else(|e| format!("ERROR {e}")),
        _ => {
            let mut out = String::with_capacity(input.len() + input.len() / 4);
            for line in input.lines() {
                match toolloop::turn::repair::repair_to_string(line) {
                    Ok((t, _)) => out.push_str(&t),
                    Err(e) => out.push_str(&format!("ERROR {e}")),
                }
                out.push('\n');
            }
            out
        }
    };
    let secs = started.elapsed().as_secs_f64();
    std::fs::write(&args[3], out).expect("write the output");
    println!("{secs:.6}");
}
