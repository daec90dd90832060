use shedlock::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "a_lock_name_that_is_longer_than_the_sixty_four_bytes_of_the_name_column")]
async fn report() {}

fn main() {}
